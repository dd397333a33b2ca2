"""auditor: long-context codebase audits with exact-token packing and grounded findings."""

__version__ = "0.1.0"
