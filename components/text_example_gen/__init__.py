"""Raw text files -> packed, byte-tokenized gzip TFRecord shards (a custom Beam ExampleGen)."""
