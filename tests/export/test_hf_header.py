"""A model.safetensors whose header is not one (random bytes, a length of 2^62, a short file, a
header that is JSON but not an object) is HFFormatError naming the file: it was a MemoryError
from json.loads(fh.read(2^62)) (issue 41). A real header still reads."""

import json
import struct

import pytest

from components.serving.hf import HFFormatError, WEIGHTS_FILE
from components.serving.hf.directory import safetensors_header


@pytest.mark.parametrize("data", [struct.pack("<Q", 2**62) + b"{}", b"\x07\x00",
                                  struct.pack("<Q", 9) + b"\xff\xfe not json",
                                  struct.pack("<Q", 2) + b"[]"])
def test_a_header_that_is_not_safetensors_is_a_named_error(tmp_path, data):
    (tmp_path / WEIGHTS_FILE).write_bytes(data)
    with pytest.raises(HFFormatError, match=f"{WEIGHTS_FILE}: not a safetensors file"):
        safetensors_header(str(tmp_path))


def test_a_real_header_reads(tmp_path):
    header = {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    text = json.dumps(header).encode()
    (tmp_path / WEIGHTS_FILE).write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * 8)
    assert safetensors_header(str(tmp_path)) == header
