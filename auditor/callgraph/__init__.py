"""The call graph (being split: see the next commit)."""
