"""Test data: documents packed into seq_len + 1 windows by the data stage's own Packer."""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np

from components.text_example_gen.packing import Packer


def pack_documents(documents: Iterable[bytes], seq_len: int) -> Iterator[np.ndarray]:
    """int64 windows of one stream of byte documents (the packing rule, last window padded)."""
    packer = Packer(seq_len)
    for document in documents:
        windows = packer.add(document)
        if windows is not None:
            yield from windows.astype(np.int64)
    windows = packer.finish()
    if windows is not None:
        yield from windows.astype(np.int64)
