"""The tokenizer seam: one interface (`base.Tokenizer`) for the data stage, the model, export,
evaluation and the report; two implementations (UTF-8 bytes, SentencePiece); the TokenizerGen
stage that trains one and records it in MLMD as a Tokenizer artifact.

Importing this package is cheap (no TensorFlow, no TFX): heavy imports happen inside the functions
that need them.
"""
