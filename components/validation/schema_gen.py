"""CuratedSchemaGen: like TFX's ImportSchemaGen, for a curated schema from schemas/ resolved for
the configured sequence length at execution time (in whatever process or container runs it), so
compiling the pipeline for Kubeflow or Airflow writes nothing anywhere. Output: a standard Schema
artifact (schema.pbtxt), read by ExampleValidator and Trainer as usual."""

from components.validation import properties as validation_props
from components.storage import fs
import os

from google.protobuf import text_format
from tfx import types
from tfx.dsl.components.base import base_component, base_executor, executor_spec
from tfx.types import artifact_utils, standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from components import config as config_lib
from components.config import stages
from components.validation.schema import TEXT_LM, resolve_text_lm_schema

# What CuratedSchemaGen reads (its one declaration, components/config/stages.py): the sequence
# length and the tokenizer (its vocabulary bounds the ids), as the execution property data_config.
SCHEMA_READS = stages.StageReads(
    stage="CuratedSchemaGen", declared_in="components/validation/schema_gen.py SCHEMA_READS",
    sections={"data": stages.only("seq_len", "tokenizer", "vocab_size")}, keys={"data": "data_config"})


class CuratedSchemaGenExecutor(base_executor.BaseExecutor):
    def Do(self, input_dict, output_dict, exec_properties):
        from components.tokenizer.spec import token_spec
        artifact = artifact_utils.get_single_instance(output_dict["schema"])
        data = stages.read_back(SCHEMA_READS, exec_properties).data
        schema = resolve_text_lm_schema(data.seq_len, token_spec(data).vocab_size)
        fs.makedirs(artifact.uri)
        fs.write_text(os.path.join(artifact.uri, "schema.pbtxt"), text_format.MessageToString(schema))
        artifact.set_string_custom_property(validation_props.CURATED_SCHEMA, exec_properties["schema_name"])
        artifact.set_int_custom_property(validation_props.SEQ_LEN, data.seq_len)


class CuratedSchemaGenSpec(ComponentSpec):
    PARAMETERS = {"schema_name": ExecutionParameter(type=str),
                  # The data section as SCHEMA_READS reads it (seq_len, the tokenizer).
                  "data_config": ExecutionParameter(type=str)}
    INPUTS = {}
    OUTPUTS = {"schema": ChannelParameter(type=standard_artifacts.Schema)}


class CuratedSchemaGen(base_component.BaseComponent):
    SPEC_CLASS = CuratedSchemaGenSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(CuratedSchemaGenExecutor)

    def __init__(self, config: config_lib.Config, schema_name: str = TEXT_LM):
        super().__init__(spec=CuratedSchemaGenSpec(
            schema_name=schema_name, **stages.handoff(SCHEMA_READS, config),
            schema=types.Channel(type=standard_artifacts.Schema)))
