"""Model loaders built on the graph API.

``load_embedder(path_or_name, device="cpu", precision="f32")`` gives a BERT
sentence embedder (``rlx/models/embedder.py``) whose graph is built by
``rlx/models/bert.py`` from a Hugging Face / sentence-transformers folder.
"""

from __future__ import annotations

from rlx.models.bert import BertConfig, BertModel, PoolingConfig, resolve_model_path
from rlx.models.embedder import Embedder, load_embedder

__all__ = ["BertConfig", "BertModel", "Embedder", "PoolingConfig", "load_embedder", "resolve_model_path"]
