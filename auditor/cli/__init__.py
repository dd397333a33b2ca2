"""The ``auditor`` command line (``auditor.cli.app``), one module per command.

``main`` is re-exported so that console scripts installed as ``auditor.cli:main`` keep working.
"""

from auditor.cli.app import main

__all__ = ["main"]
