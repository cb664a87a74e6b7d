"""The named held-out sets (`eval.sets`, components/config/heldout.py): each scored whole-document
beside its own compressor figures (components/evaluation/documents.py), recorded on the
ModelEvaluation as `heldout_<set>_<figure>` (this module owns the names) and gated per set.

Which documents: every text of the set's files (the evaluation-file format of decontamination:
components/corpus/contamination.py eval_texts), in file order, tokenized with the examples'
tokenizer; of those, the smallest content keys within the set's max_bytes, each cut to
eval.max_document_bytes, exactly as for the eval split. The same bytes for the model and both
compressors. A text with a NUL byte or not valid UTF-8 is no document: skipped and counted per
reason (`heldout_<set>_skipped_<reason>`, the data stage's reasons), as the data stage does.

Memory is bounded by the cap, not the file: the files are read as a stream (a JSONL file a line
at a time), a text is tokenized only as far as its first eval.max_document_bytes can reach
(text_prefix), and the choice holds the chosen documents plus one (documents.choose_documents).
A 200 MB set file costs its read time and ~max_bytes of memory (docs/benchmarks.md).

Fresh figures: the memo key of the figures and the Evaluator's cache key carry sets_fingerprint,
a digest of the files' bytes, so a set file rewritten with other text is measured again even at
the same size and an older modification time."""

from __future__ import annotations

from typing import NamedTuple

from components.storage import listing
from components.storage.digest import content_digest
from components.corpus.contamination import eval_texts
from components.corpus.documents import BINARY, NOT_UTF8, classify
from components.evaluation import documents as documents_lib

PREFIX = "heldout_"
SETS_PROPERTY = "heldout_sets"     # the ModelEvaluation's comma-separated set names
SKIPPED_REASONS = (BINARY, NOT_UTF8)
SET_COUNTS = tuple(f"skipped_{reason}" for reason in SKIPPED_REASONS)   # heldout_<set>_<count>
# Bytes read past eval.max_document_bytes to find the whitespace a text is cut at (text_prefix).
PREFIX_SLACK = 4096


def property_name(set_name: str, figure: str) -> str:
    """`heldout_<set>_<figure>`, figure one of documents.DOCUMENT_FIGURES / DOCUMENT_COUNTS."""
    return f"{PREFIX}{set_name}_{figure}"


def set_files(held_out) -> list[str]:
    """The set's files, sorted, by the one input resolver (components/storage/listing.py
    resolve_files: the rule data.input follows); FileNotFoundError naming the set when none."""
    return listing.resolve_files(held_out.input, f"eval.sets ({held_out.name}).input")


def sets_fingerprint(eval_config) -> str:
    """sha256 over every set's name, input as written, and its files' names and content digests
    (components/storage/digest.py) in order: the memoized figures' key and the Evaluator's cache
    key, so a set file rewritten with other text is measured again, whatever its size and mtime.
    No folder: `<heldout>` is wherever bigtrain is installed, the same set in every checkout."""
    import hashlib
    import posixpath
    outer = hashlib.sha256()
    for held_out in eval_config.sets:
        for path in set_files(held_out):
            outer.update(f"{held_out.name}\0{held_out.input}\0{posixpath.basename(path)}\0"
                         f"{content_digest(path)}\n".encode())
    return outer.hexdigest()[:16]


def sets_cache_key(eval_config) -> str:
    """sets_fingerprint where the pipeline is built, or listing.UNRESOLVED when a set's files are
    not visible there (a volume mounted only in the cluster; the data input's rule,
    listing.fingerprint_input): the executor still keys its figures on the real digest."""
    try:
        return sets_fingerprint(eval_config)
    except FileNotFoundError:
        return listing.UNRESOLVED


def text_prefix(text: bytes, max_document_bytes: int) -> bytes:
    """What of a text decides its first max_document_bytes of ids: the whole text when shorter,
    else the text up to the first run of spaces that starts at or after max_document_bytes (a
    token never spans its start: the byte tokenizer's ids are the bytes, SentencePiece splits
    before each run of spaces), else its first max_document_bytes + PREFIX_SLACK bytes at a UTF-8
    character boundary."""
    if len(text) <= max_document_bytes:
        return text
    start = max_document_bytes
    while start < min(len(text), max_document_bytes + PREFIX_SLACK):
        start = text.find(b" ", start, max_document_bytes + PREFIX_SLACK)
        if start < 0:
            break
        if text[start - 1] != 0x20:
            return text[:start]
        start += 1
    end = min(len(text), max_document_bytes + PREFIX_SLACK)
    while end > max_document_bytes and end < len(text) and text[end] & 0xC0 == 0x80:
        end -= 1      # not inside a UTF-8 character
    return text[:end]


def not_text(text: bytes) -> str:
    """The reason a held-out text is no document (SKIPPED_REASONS: the data stage's rule,
    components/corpus/documents.py classify), or "". Never too large (a text is cut first) and
    never empty: a blank text stays, as choose_documents decides what it holds."""
    verdict = classify(text, len(text))
    return verdict[0] if verdict is not None and verdict[0] in SKIPPED_REASONS else ""


class Chosen(NamedTuple):
    """A set's chosen documents (ids, smallest content key first) and what was read for them."""
    documents: list
    read: int           # documents read (texts with at least one byte, not skipped)
    smallest: int       # bytes of the smallest of them after the cut (0: none read)
    skipped: dict       # {SET_COUNTS name: texts skipped for that reason}


def set_documents(held_out, tokenizer, max_document_bytes: int) -> Chosen:
    """The set's chosen documents, read as a stream (module docstring)."""
    skipped = dict.fromkeys(SET_COUNTS, 0)

    def texts():
        for path in set_files(held_out):
            for text in eval_texts(path, max_document_bytes + PREFIX_SLACK + 1):
                text = text_prefix(text, max_document_bytes)
                reason = not_text(text)
                if reason:
                    skipped[f"skipped_{reason}"] += 1
                    continue
                yield tokenizer.encode(text)
    tally: dict = {}
    chosen = documents_lib.choose_documents(texts(), tokenizer.token_byte_lengths(),
                                            held_out.max_bytes, max_document_bytes, tally=tally)
    return Chosen(chosen, tally.get("documents", 0), tally.get("smallest", 0), skipped)


def no_document_problem(held_out, chosen: Chosen, max_document_bytes: int) -> str:
    """Why a set chose no document, naming the setting and the set; "" when it chose some."""
    if chosen.documents:
        return ""
    where = f"eval.sets {held_out.name}: {held_out.input!r}"
    skipped = ", ".join(f"{n} {name[len('skipped_'):]}" for name, n in chosen.skipped.items() if n)
    if chosen.read:
        return (f"{where}: every one of its {chosen.read} documents is larger than max_bytes "
                f"{held_out.max_bytes} (the smallest holds {chosen.smallest} bytes, cut to "
                f"eval.max_document_bytes {max_document_bytes}); raise max_bytes")
    return f"{where} holds no document" + (f" (texts skipped: {skipped})" if skipped else "")


def measure_sets(logits_fn, context: int, eval_config, tokenizer) -> dict:
    """{set name: its document figures} for every eval.sets entry."""
    out = {}
    for held_out in eval_config.sets:
        chosen = set_documents(held_out, tokenizer, eval_config.max_document_bytes)
        problem = no_document_problem(held_out, chosen, eval_config.max_document_bytes)
        if problem:
            raise ValueError(problem)
        out[held_out.name] = dict(documents_lib.document_figures(
            logits_fn, chosen.documents, tokenizer, context=context,
            stride_context=eval_config.stride_context, batch_size=eval_config.batch_size),
            **chosen.skipped)
    return out


def gate_failures(measured: dict, baseline: dict | None, eval_config) -> list[str]:
    """Each set's gates that fail, named: absolute bits/byte and regression against the blessed
    baseline measured on the same documents."""
    failures = []
    for held_out in eval_config.sets:
        bpb = measured[held_out.name]["document_bits_per_byte"]
        if held_out.max_bits_per_byte > 0 and bpb > held_out.max_bits_per_byte:
            failures.append(f"held-out {held_out.name}: {bpb:.4f} bits/byte > eval.sets "
                            f"max_bits_per_byte {held_out.max_bits_per_byte:.4f}")
        base = (baseline or {}).get(held_out.name)
        if held_out.max_bits_per_byte_regression >= 0 and base is not None:
            allowed = base["document_bits_per_byte"] + held_out.max_bits_per_byte_regression
            if bpb > allowed:
                failures.append(f"held-out {held_out.name}: {bpb:.4f} bits/byte > baseline "
                                f"{base['document_bits_per_byte']:.4f} + max_bits_per_byte_"
                                f"regression {held_out.max_bits_per_byte_regression:.4f}")
    return failures


def flat_properties(measured: dict) -> dict:
    """{heldout_<set>_<figure>: value} for every set and figure measured."""
    return {property_name(name, figure): value for name, figures in measured.items()
            for figure, value in figures.items()
            if figure in documents_lib.DOCUMENT_FIGURES + documents_lib.DOCUMENT_COUNTS + SET_COUNTS}


def task_set(eval_config):
    """The held-out set the code tasks draw from (eval.task_set, "" = the first), or None."""
    if eval_config.task_items <= 0 or not eval_config.sets:
        return None
    name = eval_config.task_set or eval_config.sets[0].name
    return next(s for s in eval_config.sets if s.name == name)


def run_set_tasks(loaded, context: int, eval_config, tokenizer) -> dict:
    """The code tasks' figures (components/evaluation/tasks.py) of one loaded SavedModel, with
    the set they ran on; {} when off; task_items 0 when the set yields no item (no eligible
    line, or one document: no distractors), which the task gate and the report name."""
    from components.evaluation.tasks import run_tasks
    held_out = task_set(eval_config)
    if held_out is None:
        return {}
    texts = [tokenizer.decode(ids) for ids in
             set_documents(held_out, tokenizer, eval_config.max_document_bytes).documents]
    figures = run_tasks(loaded, texts, eval_config, context)
    return dict(figures or {"task_items": 0}, task_set=held_out.name)


def task_gate_failure(figures: dict, eval_config) -> str:
    """eval.min_task_choice_accuracy, when on and missed or when the task set yields no item:
    the failure, named; else ""."""
    floor = eval_config.min_task_choice_accuracy
    if floor <= 0:
        return ""
    accuracy = figures.get("task_choice_accuracy")
    if accuracy is None:
        return (f"eval.min_task_choice_accuracy {floor:.4f}: no code task ran (held-out "
                f"{figures.get('task_set')} yields no item: no eligible line, or one document "
                f"only), so the gate cannot pass")
    if accuracy < floor:
        return (f"task choice accuracy {accuracy:.4f} < eval.min_task_choice_accuracy "
                f"{floor:.4f} (held-out {figures.get('task_set')})")
    return ""
