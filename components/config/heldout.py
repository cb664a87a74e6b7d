"""The eval section's named held-out sets (`eval.sets`), and the one rule that ties them to the
data stage: a set's documents are removed from training by decontamination unless it says not.

A held-out set is a glob of evaluation files (text files, or .jsonl/.json records whose string
values are each one document; `.gz` too; local or s3:// / gs://), the format
data.decontaminate.eval_files reads (components/corpus/contamination.py eval_texts). The Evaluator
scores it whole-document like the eval split (components/evaluation/documents.py)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

# Where bigtrain's own shipped held-out sets live (components/evaluation/heldout/): `<heldout>`
# in an input expands to it (components/storage/listing.py expand_input).
HELDOUT_TOKEN = "<heldout>"
SET_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


@dataclass(frozen=True)
class HeldOutSetConfig:
    name: str = ""
    input: str = ""
    # Bytes scored: the set's documents with the smallest content keys that fit, each cut to
    # eval.max_document_bytes (components/evaluation/documents.py).
    max_bytes: int = 131072
    # Gates (the blessing fails naming the set): bits/byte above max_bits_per_byte (0 = off),
    # or above the blessed baseline's on the same documents + max_bits_per_byte_regression
    # (< 0 = off).
    max_bits_per_byte: float = 0.0
    max_bits_per_byte_regression: float = -1.0
    # Training documents sharing a 13-gram with the set are removed by the data stage (its
    # input is added to data.decontaminate.eval_files, counted per set); false: not.
    decontaminate: bool = True


# A set's settings that only decide (its gates), never what is measured.
SET_GATES = ("max_bits_per_byte", "max_bits_per_byte_regression")


# The default run's held-out set: bigtrain's own pipeline/ and runners/ Python at commit 664d84f
# (34 files, frozen into one gzip JSONL file in the repository), code the default corpus (the
# standard library) does not contain, byte-identical on every install because it ships with
# bigtrain, and under bigtrain's license (no third-party terms to carry).
DEFAULT_SETS = (HeldOutSetConfig(name="bigtrain_code",
                                 input=f"{HELDOUT_TOKEN}/bigtrain-code-2026-11-27.jsonl.gz"),)


def with_decontamination(config):
    """The config with every decontaminating set's input in data.decontaminate.eval_files
    (appended once, in eval.sets order): the resolved config says what the data stage removes."""
    wanted = [s.input for s in config.eval.sets if s.decontaminate]
    listed = config.data.decontaminate.eval_files
    added = tuple(p for p in wanted if p not in listed)
    if not added:
        return config
    decontaminate = dataclasses.replace(config.data.decontaminate, eval_files=listed + added)
    return dataclasses.replace(config, data=dataclasses.replace(config.data,
                                                                decontaminate=decontaminate))


def set_problem(sets) -> str:
    """What is wrong with eval.sets, as a ConfigError message naming the entry, or "": names
    unique and simple (they become MLMD property names), inputs given, caps positive."""
    seen = set()
    for i, s in enumerate(sets):
        where = f"eval.sets[{i}]"
        if not SET_NAME.match(s.name):
            return (f"{where}.name: {s.name!r} must be lowercase letters, digits and _ (a letter "
                    "first, at most 32): it names MLMD properties")
        if s.name in seen:
            return f"{where}.name: {s.name!r} is used twice"
        seen.add(s.name)
        if not s.input:
            return f"{where}.input: empty (a glob of evaluation files)"
        if s.max_bytes < 1 or s.max_bits_per_byte < 0:
            return (f"{where}: max_bytes must be >= 1 and max_bits_per_byte >= 0 (0 = off), got "
                    f"{s.max_bytes} and {s.max_bits_per_byte}")
    return ""
