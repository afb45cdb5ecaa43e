"""Tests of rlx/models: the BERT sentence embedder."""
