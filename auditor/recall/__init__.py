"""Recall: does the model still read the whole window? Canaries planted in windows, and the
needle grids that measure recall over window lengths.

- ``canaries``: facts planted in a scan's windows and the check that the answer cites them.
- ``needles``: needle-in-a-haystack prompts and their scoring.
- ``grid``: ``auditor probe``'s grid of needle runs over lengths and depths.
"""
