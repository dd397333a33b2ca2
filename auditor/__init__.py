"""auditor: long-context codebase audits with exact-token packing and grounded findings.

The pipeline, one subpackage per stage, in order:

- ``walk``: the repository's files with their text and language (and ``walk.diff``: what a
  git change touches).
- ``tokens``: exact token counts under the model's tokenizer and chat template.
- ``index``: what each file defines, calls and imports (tree-sitter, cached).
- ``callgraph``: which function each call runs, as a graph with queries.
- ``analysis``: entry points and the static analyses (tx-outside-transaction).
- ``pack``: the repository cut into windows that fit the model's context.
- ``engine``: chat requests in, completions out (vLLM, OpenAI-compatible, replay), and
  ``engine.doctor``, the machine check.
- ``findings``: answers parsed, every claim grounded in the code, merged, suppressed.
- ``report``: a scan result as text, JSON, SARIF or Markdown.

Beside it: ``rules`` (what to look for, as data), ``languages`` (extensions, grammars and
the query files), ``recall`` (canaries and needle probes), ``planning`` (memory and time
for a checkpoint), ``runs`` (a scan, a review, many scans, end to end), ``storage`` (cache
directories and files), ``config`` (project files and the frozen ``ScanConfig``) and
``cli`` (the typer shell, one module per command); ``errors`` and ``progress`` are shared
leaves.
"""

__version__ = "0.1.0"
