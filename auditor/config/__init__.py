"""Configuration, in one home: where option defaults come from and what a scan is told.

- ``project``: ``auditor.toml`` or ``[tool.auditor]`` in ``pyproject.toml``, found from the
  working directory upward, as option defaults per command (``load_project_config``).
- ``scan``: the frozen ``ScanConfig`` (and ``WindowOptions``) every scan-like command
  builds from its resolved options, with the stage options derived from it.

Importing this package imports neither module: the command line reads the project file
for every command, and only scan-like commands build a ``ScanConfig``.
"""
