"""The Hugging Face layout of a model, out (export) and in (warm start), the one owner of its file
names. A directory holds:

  config.json               CONFIG_FILE: the transformers class (GPT2LMHeadModel for model.arch
                            gpt2, LlamaForCausalLM for llama) and its settings (mapping.py)
  model.safetensors         WEIGHTS_FILE: the tensors under the class's names, float32 or
                            bfloat16, header metadata {"format": "pt"} (mapping.py, directory.py)
  generation_config.json    GENERATION_FILE: bos/eos/pad ids; PAD and BOS suppressed, as ours
  tokenizer.json            TOKENIZER_FILE: a `tokenizers` Tokenizer whose ids equal ours
  tokenizer_config.json     TOKENIZER_CONFIG_FILE: the special tokens by name, the window
  tokenizer.model           SPM_FILE: the SentencePiece model itself (SentencePiece only)
  README.md                 CARD_FILE: the model card, from lineage facts (card.py)

Modules: mapping.py (config.json and tensors, both directions), tokenizer_files.py (the tokenizer
files), card.py (the model card), directory.py (writing and reading a whole directory, its digest
and its named errors).
"""

from components.common.errors import BigtrainError
from components.tokenizer.base import MODEL_FILE

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
GENERATION_FILE = "generation_config.json"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPM_FILE = MODEL_FILE   # the SentencePiece model, under the name both layouts give it
CARD_FILE = "README.md"
LAYOUT_FILES = (CONFIG_FILE, WEIGHTS_FILE, GENERATION_FILE, TOKENIZER_FILE, TOKENIZER_CONFIG_FILE,
                SPM_FILE, CARD_FILE)


class HFFormatError(BigtrainError, ValueError):
    """A Hugging Face directory that cannot be written or read as asked (names the file)."""


class UnsupportedHFClass(HFFormatError):
    """config.json names a class (or a setting of it) with no bigtrain equivalent."""


class HFShapeMismatch(HFFormatError):
    """A tensor or a size of the directory differs from the model the config builds."""


class MissingTokenizerFile(HFFormatError):
    """The directory lacks a tokenizer file its tokenizer needs."""


class CheckpointTooLarge(HFFormatError):
    """The checkpoint's weights and optimizer state alone exceed the memory estimate's device."""
