"""TextExampleGen: the TFX component (spec + thin Beam executor) around transforms.py.

Output: a standard `Examples` artifact (splits `train`, `eval`; gzip TFRecord of tf.train.Example
with one int64 feature `input_ids` of length seq_len + 1), the quarantine manifest and
`counters.json` at the artifact's root, and every counter as an MLMD custom property.
"""

from __future__ import annotations

from components.text_example_gen import properties as examples_props
from components.storage import fs
import json
import logging
import os

from tfx import types
from tfx.dsl.components.base import base_beam_component, base_beam_executor, executor_spec
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter
from tfx.components.util import examples_utils

from components.storage.digest import closure_digest
from components.storage.listing import (LISTING_FILE, UNRESOLVED, list_sources, listing_records,
                                        sources_fingerprint)
from components.common.errors import BigtrainError
from components.common.figures import set_figure
from components.corpus import documents, minhash
from components.corpus.screen import screen_for
from components.corpus.split_documents import reader_config
from components.text_example_gen import eval_split, mixture, shards, transforms, unit_counts
from components.tokenizer import artifact as tokenizer_artifact
from components.tokenizer import spec as spec_lib
from components.tokenizer.component import Tokenizer
from components import config as config_lib
from components.config import stages

COUNTERS_FILE = "counters.json"


def stage_counters(output_dir: str, sources: tuple[str, ...] = (),
                   units: int | None = None) -> dict[str, int]:
    """The stage's counters (COUNTER_NAMES, and every counter of each named mixture source),
    zero where a counter never moved: the units' count files summed (unit_counts.py; no runner
    metrics), read before the pieces are removed. units: how many the stage planned (checked)."""
    counters = unit_counts.read_counts(output_dir, units)
    names = list(transforms.COUNTER_NAMES) + [
        key for source in sources for key in mixture.counter_names(source)]
    per_eval_set = {name: value for name, value in sorted(counters.items())
                    if name.startswith(transforms.EVAL_SET_COUNTER)}
    return dict({name: counters.get(name, 0) for name in names}, **per_eval_set)


def cleaning_properties(data, screen) -> dict:
    """What the cleaning steps were, for MLMD and counters.json: the near-dedup parameters
    (data.dedup=near), the enabled filters (data-level, and per source the ones its documents
    meet) and the evaluation sets (their files, texts and texts too short to check), so the
    report can name every step beside its counts."""
    out = {"dedup": data.dedup, "quality_filters": json.dumps(list(data.filters.enabled)),
           "quality_filters_by_source": json.dumps({
               source.name: list(data.filters.enabled if source.filters is None
                                 else source.filters) for source in data.mixture()})}
    if data.dedup == "near":
        params = minhash.params_of(data.near_dedup)
        out["near_dedup"] = json.dumps(dict(params._asdict(), threshold=data.near_dedup.threshold),
                                       sort_keys=True)
    if screen is not None and screen.eval_sets:
        index = screen.index()  # this process's own: the texts per set, the short ones
        out["decontamination_eval_sets"] = json.dumps(
            [{"name": name, "files": list(files), "texts": texts, "too_short": short}
             for (name, files), texts, short in zip(screen.eval_sets, index.texts,
                                                    index.too_short)])
        out["decontamination"] = json.dumps({
            "ngram": screen.ngram, "action": screen.action, "min_words": screen.min_words,
            "eval_texts_too_short": sum(index.too_short)})
    return out


def check_accounting(counters: dict[str, int], files_listed: int, manifest: str, *,
                     both_splits: bool = True) -> None:
    """Nothing is lost silently: every listed file is read or quarantined, every byte read is
    packed, quarantined or a separator, and both splits hold sequences."""
    skipped = sum(counters[f"files_skipped_{r}"] for r in documents.FILE_REASONS)
    if counters["files_seen"] != files_listed or files_listed != counters["files_read"] + skipped:
        raise RuntimeError(f"file accounting broken: listed {files_listed}, seen "
                           f"{counters['files_seen']}, read {counters['files_read']}, "
                           f"quarantined {skipped}")
    accounted = (counters["bytes_packed"] + counters["bytes_quarantined"]
                 + counters["bytes_separators"] + counters["bytes_duplicate"]
                 + counters.get("bytes_sampled_out", 0))
    if counters["bytes_read"] != accounted:
        raise RuntimeError(f"byte accounting broken: read {counters['bytes_read']} != packed "
                           f"{counters['bytes_packed']} + quarantined {counters['bytes_quarantined']}"
                           f" + separators {counters['bytes_separators']} + duplicates "
                           f"{counters['bytes_duplicate']} + sampled out "
                           f"{counters.get('bytes_sampled_out', 0)}")
    for split in ("train", "eval") if both_splits else ():
        if counters[f"sequences_{split}"] == 0:
            documents_skipped = sum(counters[f"documents_skipped_{r}"] for r in documents.DOCUMENT_REASONS)
            raise ValueError(
                f"split {split!r} received no sequences ({counters['files_read']} files read, "
                f"{skipped} quarantined; {counters['documents_packed']} documents packed, "
                f"{documents_skipped} quarantined{quarantined_inline(counters, manifest)}); "
                + empty_split_advice(counters))


def empty_split_advice(counters: dict[str, int]) -> str:
    """What to do about an empty split: documents a mixture's weights sampled out are not missing
    input (a weight far below 1 keeps almost none)."""
    sampled = counters.get(examples_props.DOCUMENTS_SAMPLED_OUT, 0)
    if sampled:
        return (f"{sampled} documents were sampled out by the mixture: raise the small "
                f"data.sources[*].weight values (a weight w < 1 keeps each document with "
                f"probability w) or give the sources a share")
    return ("add input, split files into documents (data.document=separator or record) or "
            "change data.eval_fraction")


def quarantined_inline(counters: dict[str, int], manifest: str, examples: int = 3) -> str:
    """What was quarantined, in the message itself: a failed stage's outputs (the manifest
    among them) are deleted by TFX, so the message cannot send the user to that file."""
    reasons = [f"{counters[f'{kind}_skipped_{r}']} {kind} {r}"
               for kind, names in (("files", documents.FILE_REASONS),
                                   ("documents", documents.DOCUMENT_REASONS))
               for r in names if counters[f"{kind}_skipped_{r}"]]
    if not reasons:
        return ""
    first = _first_quarantined(manifest, examples)
    return (": " + ", ".join(reasons)
            + (f"; first quarantined: {', '.join(first)}" if first else ""))


def _first_quarantined(manifest: str, count: int) -> list[str]:
    """'path (reason)' of the manifest's first `count` records, while the file still exists."""
    first: list[str] = []
    try:
        if not fs.exists(manifest):
            return first
        with fs.open_file(manifest, "rb") as fh:
            for line in fh:
                record = json.loads(line)
                first.append(f"{record['path']} ({record['reason']})")
                if len(first) == count:
                    break
    except (OSError, ValueError, KeyError, BigtrainError):  # the reasons alone still say it
        pass
    return first


def run_fingerprint(exec_properties: dict, data, listed) -> str:
    """The fingerprint the run computed once when it built the pipeline (the cache key); from
    this listing's metadata only when the input was not visible there (UNRESOLVED)."""
    fingerprint = exec_properties["input_fingerprint"]
    return sources_fingerprint(data, listed) if fingerprint == UNRESOLVED else fingerprint


def source_specs(data, listed) -> list[tuple[mixture.SourceSpec, list[tuple[str, str]]]]:
    """The mixture as the Beam stage takes it: (SourceSpec, files) per source, config order."""
    return [(mixture.SourceSpec(source.name, reader_config(data, source), source.weight,
                                source.filters, source.share), files)
            for source, _, files in listed]


def write_listing(path: str, listed) -> dict[str, dict]:
    """The input listing file (components/storage/listing.py: one JSON line per file) and, per
    source, what it says in sum: {name: {"bytes_listed", "first_mtime", "last_mtime"}}."""
    lines, spans = [], {}
    for source, _, files in listed:
        span = spans.setdefault(source.name, {"bytes_listed": 0, "first_mtime": None,
                                              "last_mtime": None})
        for record in listing_records(source.name, files):
            lines.append(json.dumps(record, sort_keys=True) + "\n")
            span["bytes_listed"] += record["size"] or 0
            if record["mtime"] is not None:
                known = [t for t in (span["first_mtime"], span["last_mtime"]) if t is not None]
                span["first_mtime"] = min(known + [record["mtime"]])
                span["last_mtime"] = max(known + [record["mtime"]])
    fs.write_text(path, "".join(lines))
    return spans


def sources_summary(listed, counters: dict[str, int], spans: dict[str, dict]) -> list[dict]:
    """Per source: its settings, listing (files, bytes, mtime span) and what the stage packed
    (mixture.source_table: documents, bytes, tokens per split, epochs, realized share) and the
    share asked for (`share_asked`, None in a weight mixture). The `sources` property."""
    table = mixture.source_table(counters)
    return [dict({"name": source.name, "input": source.input, "root": root,
                  "format": source.format, "document": source.document,
                  "weight": source.weight, "share_asked": source.share,
                  "filters": None if source.filters is None else list(source.filters),
                  "files": len(files)},
                 **spans[source.name], **table.get(source.name, {}))
            for source, root, files in listed]


def data_stage(data, listed, output_dir: str, tokenizer_dir: str | None,
               screen) -> transforms.TextToTFRecordShards:
    """The whole stage's transform for a DataConfig and its listed sources (list_sources)."""
    return transforms.TextToTFRecordShards(
        [], output_dir, reader_config=reader_config(data), seq_len=data.seq_len,
        eval_fraction=data.eval_fraction, split_salt=data.split_salt,
        train_shards=data.train_shards, eval_shards=data.eval_shards,
        gzip_level=data.gzip_level, tokenizer_dir=tokenizer_dir, dedup=data.dedup,
        sources=source_specs(data, listed), near_dedup=minhash.params_of(data.near_dedup),
        screen=screen, filters=data.filters.enabled)


class TextExampleGenExecutor(base_beam_executor.BaseBeamExecutor):
    """Unpacks the config, runs TextToTFRecordShards, records counters on the artifact."""

    def Do(self, input_dict, output_dict, exec_properties):
        data = stages.read_back(DATA_READS, exec_properties).data
        examples = artifact_utils.get_single_instance(output_dict["examples"])
        listed = list_sources(data)
        files_listed = sum(len(files) for _, _, files in listed)
        fingerprint = run_fingerprint(exec_properties, data, listed)
        logging.getLogger("bigtrain.data").info(
            "TextExampleGen: %d files in %d source(s) (fingerprint %s)", files_listed, len(listed),
            fingerprint[:16])

        # The stage's Tokenizer artifact (data.tokenizer=sentencepiece), else UTF-8 bytes. Its
        # files are copied next to the shards: the Examples say which ids they hold, and the
        # Trainer (which sees only the examples) embeds exactly this tokenizer in the export.
        tokenizer_dir, loaded = None, None
        if input_dict.get("tokenizer"):
            tokenizer_dir = tokenizer_artifact.examples_tokenizer_dir(examples.uri)
            fs.copytree(artifact_utils.get_single_instance(input_dict["tokenizer"]).uri, tokenizer_dir)
            loaded = tokenizer_artifact.load(tokenizer_dir)
            spec_lib.check(loaded, spec_lib.token_spec(data), "TextExampleGen")

        # The eval split of another Examples artifact (`examples:` entries): decoded into text
        # files of this artifact once, here, then read like any evaluation file.
        decoded = eval_split.write_eval_sets(data.decontaminate.eval_files, examples.uri)
        screen = screen_for(data, decoded)
        beam_pipeline = self._make_beam_pipeline()
        stage = data_stage(data, listed, examples.uri, tokenizer_dir, screen)
        _ = beam_pipeline | "TextToTFRecordShards" >> stage
        beam_pipeline.run().wait_until_finish()
        counters = stage_counters(examples.uri, tuple(s.name for s, _, _ in listed), stage.units)
        # The pieces live until the whole stage has committed its shards (a retried assembly
        # bundle reads them again): removed here, after the pipeline finished.
        fs.rmtree(os.path.join(examples.uri, shards.PIECES_DIR))
        manifest = os.path.join(examples.uri, transforms.QUARANTINE_MANIFEST)
        check_accounting(counters, files_listed, manifest)
        listing = os.path.join(examples.uri, LISTING_FILE)
        sources = sources_summary(listed, counters, write_listing(listing, listed))
        record_outputs(examples, data, counters, dict(
            files_listed=files_listed, fingerprint=fingerprint, manifest=manifest,
            listing=listing, sources=sources, tokenizer_dir=tokenizer_dir, loaded=loaded,
            cleaning=cleaning_properties(data, screen)))


# Skip reasons the console line names (the rest are counted in counters.json and the log).
CONSOLE_REASONS = 3


def console_line(counters: dict[str, int], files_listed: int) -> str:
    """The data stage in one console line: files, documents packed, sequences, quarantined
    (files and documents in the quarantine manifest: every skip but exact duplicates) and the
    CONSOLE_REASONS commonest reasons a document or file was left out, e.g. `data: 12 files,
    3,456 documents, 7,890 sequences, 3 quarantined; skipped: duplicate 40, empty 3`."""
    skips = {reason: counters.get(f"{kind}_skipped_{reason}", 0)
             for kind, reasons in (("files", documents.FILE_REASONS),
                                   ("documents", documents.DOCUMENT_REASONS))
             for reason in reasons}
    skips["sampled_out"] = counters.get("documents_sampled_out", 0)
    quarantined = sum(n for reason, n in skips.items()
                      if reason not in (documents.DUPLICATE, "sampled_out"))
    sequences = counters.get("sequences_train", 0) + counters.get("sequences_eval", 0)
    line = (f"data: {files_listed:,} files, {counters.get('documents_packed', 0):,} documents, "
            f"{sequences:,} sequences, {quarantined:,} quarantined")
    top = sorted(((n, reason) for reason, n in skips.items() if n), key=lambda x: (-x[0], x[1]))
    if top:
        line += "; skipped: " + ", ".join(f"{reason} {n:,}" for n, reason in top[:CONSOLE_REASONS])
        line += f", +{len(top) - CONSOLE_REASONS} more" if len(top) > CONSOLE_REASONS else ""
    return line


def record_outputs(examples, data, counters: dict[str, int], found: dict) -> None:
    """counters.json beside the shards, and every figure as an MLMD property of the Examples:
    each counter (per source too), the `sources` summary (JSON), where the listing and the
    quarantine manifest are, the tokenizer."""
    emitted = counters["tokens_real"] + counters["tokens_padding"]
    summary = dict(counters, files_listed=found["files_listed"],
                   real_token_fraction=round(counters["tokens_real"] / max(emitted, 1), 6))
    sources = found["sources"]
    described = {"input": data.input if not data.sources else
                 "; ".join(f"{s['name']}={s['input']}" for s in sources),
                 "input_root": "; ".join(s["root"] for s in sources),
                 "format": ",".join(sorted({s["format"] for s in sources})),
                 "document": ",".join(sorted({s["document"] for s in sources})),
                 "input_fingerprint": found["fingerprint"],
                 "quarantine_manifest": found["manifest"], "input_listing": found["listing"],
                 "sources": json.dumps(sources, sort_keys=True), **found["cleaning"]}
    fs.write_text(os.path.join(examples.uri, COUNTERS_FILE), json.dumps(
        dict(summary, **dict(described, sources=sources)), indent=2, sort_keys=True))
    # The console gets one short line; every counter goes to the run's log file (and to the
    # console with -v: not a `bigtrain` logger) and counters.json.
    logging.getLogger("bigtrain.data").info("%s", console_line(counters, found["files_listed"]))
    logging.getLogger(__name__).info("TextExampleGen counters: %s",
                                     json.dumps(summary, sort_keys=True))

    examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
    examples_utils.set_payload_format(examples, example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE)
    examples_utils.set_file_format(examples, "tfrecords_gzip")
    for name, value in counters.items():
        examples.set_int_custom_property(name, value)
    examples.set_int_custom_property(examples_props.FILES_LISTED, found["files_listed"])
    set_figure(examples, examples_props.REAL_TOKEN_FRACTION, summary["real_token_fraction"], "TextExampleGen")
    examples.set_int_custom_property(examples_props.SEQ_LEN, data.seq_len)
    for name, value in described.items():
        examples.set_string_custom_property(name, value)
    examples.set_string_custom_property(examples_props.TOKENIZER, data.tokenizer)
    if found["tokenizer_dir"] is not None:
        loaded = found["loaded"]
        examples.set_string_custom_property(examples_props.TOKENIZER_DIR, found["tokenizer_dir"])
        examples.set_string_custom_property(examples_props.TOKENIZER_KIND, loaded.kind)
        examples.set_int_custom_property(examples_props.VOCAB_SIZE, loaded.vocab_size)
        examples.set_int_custom_property(examples_props.PAD_ID, loaded.pad_id)


# What decides the Examples: the data stage's import closure within this repository (the data
# stage, the corpus rules, the listing, the I/O seam, named errors, the feature name, the
# tokenizer seam: components/storage/digest.py import_closure), less components.config: settings
# reach the stage as exec properties (the data section's JSON, defaults filled in), which TFX keys
# on already; its code changes with every new setting of any stage, which would re-run the data
# stage for nothing.
DATA_ENTRY, DATA_LEAVE_OUT = "components.text_example_gen.component", ("components.config",)


def data_code_digest(root: str | None = None) -> str:
    return closure_digest(DATA_ENTRY, leave_out=DATA_LEAVE_OUT, root=root)


# What the data stage reads (its one declaration, components/config/stages.py): the whole data
# section, as the execution property data_config.
DATA_READS = stages.StageReads(
    stage="TextExampleGen", declared_in="components/text_example_gen/component.py DATA_READS",
    sections={"data": stages.ALL}, keys={"data": "data_config"})


class TextExampleGenSpec(ComponentSpec):
    PARAMETERS = {
        # The `data` section of the config as canonical JSON (the cache key of this stage).
        "data_config": ExecutionParameter(type=str),
        # The input's fingerprint, computed once by the runner when it builds the pipeline, so
        # that edited input files invalidate the cache even when the config is unchanged.
        "input_fingerprint": ExecutionParameter(type=str),
        # Digest of the data stage's and the tokenizer's code: editing them re-runs this stage.
        "code_digest": ExecutionParameter(type=str, optional=True),
    }
    # The Tokenizer artifact to tokenize with (TokenizerGen); absent: UTF-8 bytes.
    INPUTS = {"tokenizer": ChannelParameter(type=Tokenizer, optional=True)}
    OUTPUTS = {"examples": ChannelParameter(type=standard_artifacts.Examples)}


class TextExampleGen(base_beam_component.BaseBeamComponent):
    SPEC_CLASS = TextExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(TextExampleGenExecutor)

    def __init__(self, config: config_lib.Config, input_fingerprint: str,
                 tokenizer: types.BaseChannel | None = None):
        super().__init__(spec=TextExampleGenSpec(
            **stages.handoff(DATA_READS, config),
            input_fingerprint=input_fingerprint,
            # Always: a reader fix must not leave stale shards cached (it was None for bytes).
            code_digest=data_code_digest(),
            tokenizer=tokenizer,
            examples=types.Channel(type=standard_artifacts.Examples)))
