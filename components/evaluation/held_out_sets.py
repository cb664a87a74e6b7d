"""The named held-out sets (`eval.sets`, components/config/heldout.py): each scored whole-document
beside its own compressor figures (components/evaluation/documents.py), recorded on the
ModelEvaluation as `heldout_<set>_<figure>` (this module owns the names) and gated per set.

Which documents: every text of the set's files (the evaluation-file format of decontamination:
components/corpus/contamination.py eval_texts), in file order, tokenized with the examples'
tokenizer; of those, the smallest content keys within the set's max_bytes, each cut to
eval.max_document_bytes, exactly as for the eval split. The same bytes for the model and both
compressors."""

from __future__ import annotations

from components.common import listing
from components.corpus.contamination import eval_texts
from components.evaluation import documents as documents_lib

PREFIX = "heldout_"
SETS_PROPERTY = "heldout_sets"     # the ModelEvaluation's comma-separated set names


def property_name(set_name: str, figure: str) -> str:
    """`heldout_<set>_<figure>`, figure one of documents.DOCUMENT_FIGURES / DOCUMENT_COUNTS."""
    return f"{PREFIX}{set_name}_{figure}"


def set_files(held_out) -> list[str]:
    """The set's files, sorted, by the one input resolver (components/common/listing.py
    resolve_files: the rule data.input follows); FileNotFoundError naming the set when none."""
    return listing.resolve_files(held_out.input, f"eval.sets ({held_out.name}).input")


def sets_fingerprint(eval_config) -> str:
    """The listing fingerprint (path, size, mtime: components/common/listing.py) of every set's
    files: part of the memoized figures' key, so an edited set is measured again."""
    import hashlib
    outer = hashlib.sha256()
    for held_out in eval_config.sets:
        files = set_files(held_out)
        outer.update(f"{held_out.name}\0{listing.input_fingerprint([(f, f) for f in files])}\n"
                     .encode())
    return outer.hexdigest()[:16]


def set_documents(held_out, tokenizer, max_document_bytes: int) -> list:
    """The set's chosen documents (ids), smallest content key first."""
    texts = (text for path in set_files(held_out) for text in eval_texts(path))
    return documents_lib.choose_documents((tokenizer.encode(t) for t in texts),
                                          tokenizer.token_byte_lengths(), held_out.max_bytes,
                                          max_document_bytes)


def measure_sets(logits_fn, context: int, eval_config, tokenizer) -> dict:
    """{set name: its document figures} for every eval.sets entry."""
    out = {}
    for held_out in eval_config.sets:
        chosen = set_documents(held_out, tokenizer, eval_config.max_document_bytes)
        if not chosen:
            raise ValueError(f"eval.sets {held_out.name}: {held_out.input!r} holds no document")
        out[held_out.name] = documents_lib.document_figures(
            logits_fn, chosen, tokenizer, context=context,
            stride_context=eval_config.stride_context, batch_size=eval_config.batch_size)
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
            if figure in documents_lib.DOCUMENT_FIGURES + documents_lib.DOCUMENT_COUNTS}


def task_set(eval_config):
    """The held-out set the code tasks draw from (eval.task_set, "" = the first), or None."""
    if eval_config.task_items <= 0 or not eval_config.sets:
        return None
    name = eval_config.task_set or eval_config.sets[0].name
    return next(s for s in eval_config.sets if s.name == name)


def run_set_tasks(loaded, context: int, eval_config, tokenizer) -> dict:
    """The code tasks' figures (components/evaluation/tasks.py) of one loaded SavedModel, with
    the set they ran on; {} when off."""
    from components.evaluation.tasks import run_tasks
    held_out = task_set(eval_config)
    if held_out is None:
        return {}
    texts = [tokenizer.decode(ids) for ids in
             set_documents(held_out, tokenizer, eval_config.max_document_bytes)]
    figures = run_tasks(loaded, texts, eval_config, context)
    return dict(figures, task_set=held_out.name) if figures else {}


def task_gate_failure(figures: dict, eval_config) -> str:
    """eval.min_task_choice_accuracy, when on and missed: the failure, named; else ""."""
    floor = eval_config.min_task_choice_accuracy
    accuracy = figures.get("task_choice_accuracy")
    if floor > 0 and accuracy is not None and accuracy < floor:
        return (f"task choice accuracy {accuracy:.4f} < eval.min_task_choice_accuracy "
                f"{floor:.4f} (held-out {figures.get('task_set')})")
    return ""
