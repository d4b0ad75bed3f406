"""The encoder's stages: settings, inputs and tokenization, landmarks and windows, batching, pooling and
the runtime backends. :class:`lmk_rag.LMKEncoder` is the face that runs them."""
