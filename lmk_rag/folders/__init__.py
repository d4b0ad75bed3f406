"""Model folders: loading an encoder from a name or folder, reading and writing lmk-rag and
sentence-transformers folders, LoRA adapters."""
