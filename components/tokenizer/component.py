"""TokenizerGen: the TFX component (spec + thin executor) around stage.build_tokenizer.

Output: a Tokenizer artifact (type `Tokenizer`): the tokenizer's directory (its description file,
and for SentencePiece its model and vocabulary: components/tokenizer/base.py names them) with its figures as MLMD properties, so
`bigtrain lineage` and the run report read them from one place.

Cache key: the tokenizer's settings (only the data settings that decide its output, so changing
data.seq_len does not retrain it), a content fingerprint of the raw input, and a digest of the
code that decides the output (editing the tokenizer invalidates the cache).
"""

from __future__ import annotations


from tfx import types
from tfx.dsl.components.base import base_beam_component, base_beam_executor, executor_spec
from tfx.types import artifact, artifact_utils
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from components.storage.digest import closure_digest
from components.common.figures import require_finite, set_figure
from components.tokenizer import base as tokenizer_base
from components.tokenizer import properties as names
from components.tokenizer import stage
from components import config as config_lib
from components.config import stages

# What TokenizerGen reads (its one declaration, components/config/stages.py): the data settings
# a tokenizer depends on, as the execution property tokenizer_config; every other data setting
# leaves it unchanged (and it runs only with data.tokenizer=sentencepiece).
TOKENIZER_READS = stages.StageReads(
    stage="TokenizerGen", declared_in="components/tokenizer/component.py TOKENIZER_READS",
    sections={"data": stages.only(
        "input", "exclude", "format", "document", "separator", "text_field", "max_document_bytes",
        "eval_fraction", "split_salt", "dedup", "newline", "tokenizer", "vocab_size",
        "tokenizer_model_type", "tokenizer_sample_bytes")},
    keys={"data": "tokenizer_config"})

_STRING = artifact.Property(type=artifact.PropertyType.STRING)
_INT = artifact.Property(type=artifact.PropertyType.INT)
_FLOAT = artifact.Property(type=artifact.PropertyType.FLOAT)


class Tokenizer(artifact.Artifact):
    """A trained tokenizer: what the data stage tokenizes with and the export embeds."""
    TYPE_NAME = "Tokenizer"
    PROPERTIES = {   # components/tokenizer/properties.py owns the names (and says what they are)
        names.KIND: _STRING, names.MODEL_TYPE: _STRING, names.VOCAB_SIZE: _INT,
        names.PAD_ID: _INT, names.BOS_ID: _INT, names.EOS_ID: _INT,
        names.MODEL_FILE: _STRING, names.VOCAB_FILE: _STRING, names.MODEL_SHA256: _STRING,
        names.BYTES_PER_TOKEN: _FLOAT, names.SAMPLE_BYTES: _INT, names.SAMPLE_DOCUMENTS: _INT,
        names.CODE_DIGEST: _STRING,
    }


def record(artifact_: Tokenizer, tokenizer, figures: dict, code_digest: str) -> None:
    import os
    description = tokenizer.describe()
    has_model = tokenizer.kind == "sentencepiece"
    artifact_.kind = tokenizer.kind
    artifact_.model_type = description.get("model_type", "none") if has_model else "none"
    artifact_.vocab_size = tokenizer.vocab_size
    artifact_.pad_id, artifact_.bos_id, artifact_.eos_id = (
        tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
    artifact_.model_file = (os.path.join(artifact_.uri, tokenizer_base.MODEL_FILE)
                            if has_model else "")
    artifact_.vocab_file = (os.path.join(artifact_.uri, tokenizer_base.VOCAB_FILE)
                            if has_model else "")
    artifact_.model_sha256 = description.get("model_sha256", "")
    artifact_.bytes_per_token = require_finite("TokenizerGen", "bytes_per_token",
                                               float(figures["bytes_per_token"]))
    artifact_.sample_bytes = int(figures["sample_bytes"])
    artifact_.sample_documents = int(figures["sample_documents"])
    artifact_.code_digest = code_digest
    for name in names.COUNTS:
        artifact_.set_int_custom_property(name, int(figures[name]))
    set_figure(artifact_, names.TRAINING_SECONDS, float(figures[names.TRAINING_SECONDS]),
               "TokenizerGen")


class TokenizerGenExecutor(base_beam_executor.BaseBeamExecutor):
    """Reads the sample with the stage's beam_pipeline_args (sample_pipeline.py), trains, records."""

    def Do(self, input_dict, output_dict, exec_properties):
        data = stages.read_back(TOKENIZER_READS, exec_properties).data
        output = artifact_utils.get_single_instance(output_dict["tokenizer"])
        tokenizer, figures = stage.build_tokenizer(data, output.uri, self._make_beam_pipeline)
        record(output, tokenizer, figures, exec_properties["code_digest"])


# What decides a Tokenizer artifact: this stage's import closure (components/storage/digest.py
# import_closure: this package, the corpus listing, document, quarantine and split rules that
# documents.read_documents applies), less components.config (settings are its exec properties).
TOKENIZER_ENTRY, TOKENIZER_LEAVE_OUT = "components.tokenizer.component", ("components.config",)


def tokenizer_code_digest(root: str | None = None) -> str:
    return closure_digest(TOKENIZER_ENTRY, leave_out=TOKENIZER_LEAVE_OUT, root=root)


class TokenizerGenSpec(ComponentSpec):
    PARAMETERS = {
        # The data section as TOKENIZER_READS reads it (its other fields at their defaults).
        "tokenizer_config": ExecutionParameter(type=str),
        # The input's fingerprint (computed once by the runner), so edited files retrain the tokenizer.
        "input_fingerprint": ExecutionParameter(type=str),
        # Digest of the code that decides the output (tokenizer_code_digest).
        "code_digest": ExecutionParameter(type=str),
    }
    INPUTS = {}
    OUTPUTS = {"tokenizer": ChannelParameter(type=Tokenizer)}


class TokenizerGen(base_beam_component.BaseBeamComponent):
    SPEC_CLASS = TokenizerGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(TokenizerGenExecutor)

    def __init__(self, config: config_lib.Config, input_fingerprint: str,
                 code_digest: str | None = None):
        super().__init__(spec=TokenizerGenSpec(
            **stages.handoff(TOKENIZER_READS, config),
            input_fingerprint=input_fingerprint,
            code_digest=code_digest or tokenizer_code_digest(),
            tokenizer=types.Channel(type=Tokenizer)))
