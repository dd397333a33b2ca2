"""Findings stage: the answer contract's data objects, parsing of model answers, grounding
of every claim against the repository, fingerprints, merging, suppressions and
prompt-injection flags.

Inputs: completion text (model) or static-analysis results; the packed repository view
(``RepositoryView``: packed files, function index, call graph). Outputs: grounded
``Finding`` objects in report order, ``Rejected`` claims with their reasons.

- ``model``: ``Finding``, ``ChainStep``, ``Claim``, ``Rejected``.
- ``fingerprints``: a finding's identity from its structure (rule, functions, normalised write calls).
- ``answer``: the answer contract's JSON Schema and ``parse_answer``.
- ``grounding``: ``ground_claim``/``ground_answer`` against a ``RepositoryView``.
- ``merge``: ``merge_findings`` (every distinct entry chain kept in ``chains``).
- ``suppress``: inline ``auditor: ignore[...]`` comments and baselines.
- ``injection``: prompt-injection flags for packed files.
"""
