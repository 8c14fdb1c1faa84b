"""The on-disk index: bm25s + FAISS + chunk store + manifest, built atomically (``store``), its folder layout
and build lock (``layout``), and the sentence encoders it embeds with (``embeddings``: sentence-transformers,
``encoder``: ONNX Runtime, torch-free).

Nothing is imported here, so importing one module stays cheap.
"""

__all__ = ["embeddings", "encoder", "layout", "store"]
