"""TensorFlow's `saved_model_cli` with the tensorflow-text ops registered first.

Stock `saved_model_cli run` on a SavedModel that embeds a SentencePiece tokenizer fails with
"Op type not registered 'SentencepieceOp'": the ops live in tensorflow-text's shared libraries,
which only `import tensorflow_text` loads. Same arguments as saved_model_cli:

    python -m components.tokenizer.saved_model_cli run --dir <export> --tag_set serve \
        --signature_def generate --input_exprs 'prompt=["def "];max_new_tokens=[16]'
"""

import sys


def main() -> int:
    import tensorflow_text  # noqa: F401  (registers SentencepieceOp & co. in this process)
    from tensorflow.python.tools import saved_model_cli
    sys.argv[0] = "saved_model_cli"
    return saved_model_cli.main()


if __name__ == "__main__":
    sys.exit(main())
