"""CuratedSchemaGen: like TFX's ImportSchemaGen, for a curated schema from schemas/ resolved for
the configured sequence length at execution time (in whatever process or container runs it), so
compiling the pipeline for Kubeflow or Airflow writes nothing anywhere. Output: a standard Schema
artifact (schema.pbtxt), read by ExampleValidator and Trainer as usual."""

from components.validation import properties as validation_props
from components.common import fs
import os

from google.protobuf import text_format
from tfx import types
from tfx.dsl.components.base import base_component, base_executor, executor_spec
from tfx.types import artifact_utils, standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from components.validation.schema import TEXT_LM, resolve_text_lm_schema


class CuratedSchemaGenExecutor(base_executor.BaseExecutor):
    def Do(self, input_dict, output_dict, exec_properties):
        artifact = artifact_utils.get_single_instance(output_dict["schema"])
        # vocab_size absent (pipelines compiled before it existed): the byte tokenizer's 259.
        schema = resolve_text_lm_schema(exec_properties["seq_len"],
                                        exec_properties.get("vocab_size") or None)
        fs.makedirs(artifact.uri)
        fs.write_text(os.path.join(artifact.uri, "schema.pbtxt"), text_format.MessageToString(schema))
        artifact.set_string_custom_property(validation_props.CURATED_SCHEMA, exec_properties["schema_name"])
        artifact.set_int_custom_property(validation_props.SEQ_LEN, exec_properties["seq_len"])


class CuratedSchemaGenSpec(ComponentSpec):
    PARAMETERS = {"schema_name": ExecutionParameter(type=str),
                  "seq_len": ExecutionParameter(type=int),
                  # The tokenizer's vocabulary size: ids must lie in [0, vocab_size - 1].
                  "vocab_size": ExecutionParameter(type=int, optional=True)}
    INPUTS = {}
    OUTPUTS = {"schema": ChannelParameter(type=standard_artifacts.Schema)}


class CuratedSchemaGen(base_component.BaseComponent):
    SPEC_CLASS = CuratedSchemaGenSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(CuratedSchemaGenExecutor)

    def __init__(self, seq_len: int, schema_name: str = TEXT_LM, vocab_size: int | None = None):
        # The byte vocabulary stays implicit (None) so the default pipeline's cache key is as before.
        from components.tokenizer.spec import BYTES
        super().__init__(spec=CuratedSchemaGenSpec(
            schema_name=schema_name, seq_len=seq_len,
            vocab_size=None if vocab_size in (None, BYTES.vocab_size) else vocab_size,
            schema=types.Channel(type=standard_artifacts.Schema)))
