"""TFX's Pusher executor with the copy step replaced by components.push.push_model (atomic,
idempotent, integer versions) of the variant the blessing names (export.serve). The Pusher
component, its blessing check and its PushedModel artifact are TFX's own."""

import json
import os

from tfx.components.pusher import executor as pusher_executor
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils
from tfx.utils import proto_utils

from components.config import stages
from components.serving import blessing as blessing_props
from components.push import properties as push_props
from components.push.push import LOGGER, deploy_settings, format_writers, push_model

# What the Pusher reads (its one declaration, components/config/stages.py): the push section
# (deployment files, formats); its custom_config is stages.custom_config of it.
PUSHER_READS = stages.StageReads(stage="Pusher",
                                 declared_in="components/push/executor.py PUSHER_READS",
                                 sections={"push": stages.ALL})


class AtomicPusherExecutor(pusher_executor.Executor):
    def Do(self, input_dict, output_dict, exec_properties):
        model_push = artifact_utils.get_single_instance(output_dict["pushed_model"])
        blessing = (input_dict.get("model_blessing") or [None])[0]
        if not self.CheckBlessing(input_dict):
            self._MarkNotPushed(model_push)
            reason = blessing.get_string_custom_property(blessing_props.REASON) if blessing else ""
            model_push.set_string_custom_property(push_props.REASON, reason or "not blessed")
            LOGGER.info("not pushed: %s", reason)
            return
        model = artifact_utils.get_single_instance(input_dict["model"])
        destination = pusher_pb2.PushDestination()
        proto_utils.json_to_proto(exec_properties["push_destination"], destination)
        # The variant the Evaluator blessed (export.serve): its folder inside the Model artifact.
        variant = blessing.get_string_custom_property(blessing_props.SERVE_VARIANT) if blessing else ""
        serve_path = blessing.get_string_custom_property(blessing_props.SERVE_PATH) if blessing else ""
        source = os.path.join(model.uri, serve_path) if serve_path else self.GetModelPath(input_dict)
        push = stages.read_custom(PUSHER_READS, json.loads(exec_properties["custom_config"])).push
        run_id = getattr(self._context, "pipeline_run_id", None) if self._context else None
        result = push_model(source, destination.filesystem.base_directory,
                            record={"model_id": model.id, "model_uri": model.uri,
                                    "variant": variant or "float"},
                            deploy=deploy_settings(push),
                            extras=format_writers(push.formats, model.uri,
                                                  {"run_id": run_id, "model_name": os.path.basename(
                                                      destination.filesystem.base_directory.rstrip("/"))}))
        model_push.set_string_custom_property(push_props.VARIANT, variant or "float")
        if result.pushed:
            self._MarkPushed(model_push, pushed_destination=result.path,
                             pushed_version=str(result.version))
        else:
            self._MarkNotPushed(model_push)
            model_push.set_string_custom_property(push_props.SERVED_VERSION, str(result.version))
        model_push.set_string_custom_property(push_props.REASON, result.reason)
