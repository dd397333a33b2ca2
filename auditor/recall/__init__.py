"""Recall: does the model still read the whole window? Canaries (facts planted in the
prompt, each with a question the answer must get right) measure it, in two places.

- ``canaries``: making canaries (per-language sources, names, values), planting them at
  depths, and scoring the answers to their questions.
- ``syntax``: what canaries are made of: the vocabulary, and per language how a constant,
  a function and a module are written.
- ``windows``: canaries planted in a scan's windows and the check that the answer cites them.
- ``grid``: ``auditor probe``'s grid of canary runs over window lengths and depths (a
  needle-in-a-haystack test on real code).
"""
