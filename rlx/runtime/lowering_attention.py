"""Placeholder: lowering of RoPE and attention (issue 3)."""
