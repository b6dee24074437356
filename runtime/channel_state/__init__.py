"""Channel state of unaligned checkpoints: the writer that collects in-flight input and output buffers per
checkpoint (``writer``) and the reader that re-injects them on restore (``reader``)."""
