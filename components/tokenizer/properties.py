"""The Tokenizer artifact's MLMD property names, the one place that spells them: the type's
declared properties (components/tokenizer/component.py declares them with these names and
TokenizerGen sets them) and the custom figures TokenizerGen adds; the run report and
`bigtrain lineage` read them. No TensorFlow or TFX import."""

from __future__ import annotations

# declared by the Tokenizer artifact type
KIND = "kind"                    # bytes | sentencepiece
MODEL_TYPE = "model_type"        # unigram | bpe | none (bytes)
VOCAB_SIZE = "vocab_size"
PAD_ID, BOS_ID, EOS_ID = "pad_id", "bos_id", "eos_id"
MODEL_FILE = "model_file"        # path of the SentencePiece model ("" for bytes)
VOCAB_FILE = "vocab_file"        # path of the vocabulary listing ("" for bytes)
MODEL_SHA256 = "model_sha256"
BYTES_PER_TOKEN = "bytes_per_token"   # on the eval sample, specials excluded
SAMPLE_BYTES, SAMPLE_DOCUMENTS = "sample_bytes", "sample_documents"   # the training sample
CODE_DIGEST = "code_digest"
DECLARED = (KIND, MODEL_TYPE, VOCAB_SIZE, PAD_ID, BOS_ID, EOS_ID, MODEL_FILE, VOCAB_FILE,
            MODEL_SHA256, BYTES_PER_TOKEN, SAMPLE_BYTES, SAMPLE_DOCUMENTS, CODE_DIGEST)
# custom figures
COUNTS = ("eval_sample_bytes", "eval_sample_tokens", "eval_sample_documents",
          "train_documents_seen", "train_bytes_seen", "documents_skipped")
TRAINING_SECONDS = "training_seconds"

PROPERTIES = frozenset(DECLARED + COUNTS + (TRAINING_SECONDS,))
