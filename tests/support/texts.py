"""Real texts for the tokenizer and export tests: the standard library's sources, multilingual
lines, a corpus of both, two short code texts."""

import glob
import os
import sysconfig


MULTILINGUAL = [
    "caf\u00e9 cr\u00e8me br\u00fbl\u00e9e", "\u0416\u0443\u043a \u0438 \u043f\u0430\u0443\u043a",
    "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3002\u4e2d\u6587", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e", "emoji \U0001f600\U0001f680 ok",
    "tab\tand\r\nnewlines\x01\x7f", "   runs    of   spaces  ", "\u2581 the piece mark",
]


def corpus() -> list[str]:
    lines = [line for text in stdlib_texts(["json"]) for line in text.split("\n")][:400]
    return lines + MULTILINGUAL + ["\n".join(MULTILINGUAL)]


STDLIB = sysconfig.get_paths()["stdlib"]


def stdlib_texts(packages, limit=None):
    paths = sorted(p for pkg in packages for p in glob.glob(os.path.join(STDLIB, pkg, "*.py")))
    texts = [open(p, encoding="utf-8").read() for p in paths]
    return texts[:limit] if limit else texts


TEXTS = [b"import json\n\ndef main():\n    return json.dumps({'a': 1})\n", b"class Encoder(object):\n  "]
