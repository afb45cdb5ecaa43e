"""Placeholder: numpy references of RoPE and attention (issue 3)."""
