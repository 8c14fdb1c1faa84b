"""The on-disk index: bm25s + FAISS + chunk store + manifest, as loaded and searched (``store``) and built
atomically (``build``), its folder layout and build lock (``layout``), and the sentence encoders it embeds with
(``embeddings``: sentence-transformers, ``encoder``: ONNX Runtime, torch-free, over the model's ONNX export,
``export``).

Nothing is imported here, so importing one module stays cheap.
"""

__all__ = ["build", "embeddings", "encoder", "export", "layout", "store"]
