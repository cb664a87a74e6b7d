"""Every data-stage DoFn is safe to retry: a runner that re-runs a bundle (a pre-empted worker)
gets the same outputs and the same bytes. Each DoFn's bundle is run twice on the same element.

Catches: assembly deleting its pieces (the old shards.concatenate: the second AssembleFn attempt
failed with FileNotFoundError), fixed temporary names (`path + ".tmp"`: two attempts wrote one
file), and ConvertUnitFn tokenizing with UTF-8 bytes when a runner skips setup() (Beam's
DaskRunner) although the stage has a SentencePiece tokenizer.
"""

import collections

from components.storage import listing
from components.corpus import readers
from components.text_example_gen import order, shards, transforms
from components.tokenizer import training
from components.tokenizer.sentencepiece_model import SentencePieceTokenizer
from tests.support.texts import stdlib_texts
from tests.support.data_stage import reader_config
from tests.support.data_stage import tree_digest

NUM_SHARDS = {"train": 3, "eval": 2}


def convert_fn(out_dir, tokenizer_dir=None):
    return transforms.ConvertUnitFn(reader_config(), out_dir, seq_len=64, eval_fraction=0.3,
                                    split_salt="", num_shards=NUM_SHARDS,
                                    tokenizer_dir=tokenizer_dir)


def units_of(corpus):
    _, files = listing.list_input_files(corpus[0])
    return readers.plan_units(files, reader_config())


def test_convert_and_assemble_bundles_run_twice_give_the_same_bytes(corpus, tmp_path):
    out = str(tmp_path / "out")
    fn = convert_fn(out)
    fn.setup()
    outputs = collections.defaultdict(list)
    for unit in units_of(corpus):
        first = list(fn.process(unit))
        after_first = tree_digest(out)
        second = list(fn.process(unit))  # the retried bundle
        assert second == first and tree_digest(out) == after_first
        for key, value in first:
            outputs[key].append(value)
    order_train_twice(out, outputs)
    assemble = transforms.AssembleFn(out, NUM_SHARDS)
    for key, pieces in sorted(outputs.items()):
        first = list(assemble.process((key, pieces)))
        after_first = tree_digest(out)
        second = list(assemble.process((key, pieces)))  # the retried bundle: pieces still there
        assert second == first and tree_digest(out) == after_first
    tree = tree_digest(out)
    assert not [name for name in tree if ".tmp" in name]
    assert [name for name in tree if name.startswith(shards.PIECES_DIR)]  # pieces outlive assembly


def order_train_twice(out, outputs):
    """The train pieces through order.py's DoFns, each unit's spill and each bucket written twice
    (the bucket the second time with its ranges in another order, as a GroupByKey may give them):
    the same ranges, pieces and bytes. Adds the ordered pieces to `outputs` for assembly."""
    train = outputs.pop((order.KIND, "train", 0))
    total = sum(count for _, _, count in train)
    buckets = collections.defaultdict(list)
    key = order.KeyFn(out)
    for piece in train:
        first = list(key.process(((order.KIND, "train", 0), piece), total))
        after_first = tree_digest(out)
        assert list(key.process(((order.KIND, "train", 0), piece), total)) == first
        assert tree_digest(out) == after_first
        for bucket, value in first:
            buckets[bucket].append(value)
    sizes = {bucket: sum(spilled.count for spilled in values) for bucket, values in buckets.items()}
    write = order.SpillSortWriteFn(out, NUM_SHARDS["train"], shards.GZIP_LEVEL)
    for bucket, values in sorted(buckets.items()):
        first = list(write.process((bucket, values), sizes, total))
        after_first = tree_digest(out)
        second = list(write.process((bucket, values[::-1]), sizes, total))
        assert second == first and tree_digest(out) == after_first
        for key, value in first:
            outputs[key].append(value)


def test_temporary_names_are_unique_per_attempt(tmp_path):
    path = str(tmp_path / "piece.gz")
    assert shards.tmp_name(path) != shards.tmp_name(path)
    assert shards.tmp_name(path).startswith(path + ".tmp-")


def test_convert_loads_its_tokenizer_without_setup(corpus, tmp_path):
    """The same unit through a DoFn whose setup() ran and one whose setup() never ran."""
    proto = training.train_sentencepiece(stdlib_texts(["json"]), 400, "unigram")
    tokenizer_dir = str(tmp_path / "tokenizer")
    SentencePieceTokenizer(proto, model_type="unigram").save(tokenizer_dir)
    unit = units_of(corpus)[0]
    with_setup = convert_fn(str(tmp_path / "a"), tokenizer_dir)
    with_setup.setup()
    list(with_setup.process(unit))
    without_setup = convert_fn(str(tmp_path / "b"), tokenizer_dir)
    list(without_setup.process(unit))
    bytes_only = convert_fn(str(tmp_path / "c"))
    list(bytes_only.process(unit))
    assert tree_digest(str(tmp_path / "a"))
    assert tree_digest(str(tmp_path / "b")) == tree_digest(str(tmp_path / "a"))
    assert tree_digest(str(tmp_path / "c")) != tree_digest(str(tmp_path / "a"))
