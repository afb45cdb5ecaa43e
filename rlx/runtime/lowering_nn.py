"""Placeholder: lowering of the transformer op set (issue 3)."""
