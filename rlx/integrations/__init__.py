"""Bridges to engines that run rlx at scale; each imports its engine on first use.

``rlx.integrations.ray``: ``RlxEmbedder`` for Ray Data's ``map_batches`` and
``embed_corpus`` (``rlx embed --ray``), resumable block by block through
``rlx.integrations.corpus``. Needs the ``ray`` extra (``pip install 'rlx[ray]'``).
"""
