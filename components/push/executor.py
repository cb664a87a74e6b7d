"""TFX's Pusher executor with the copy step replaced by components.push.push_model (atomic,
idempotent, integer versions). The Pusher component, its blessing check and its PushedModel
artifact are TFX's own."""

from tfx.components.pusher import executor as pusher_executor
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils
from tfx.utils import proto_utils

from components.push.push import LOGGER, push_model


class AtomicPusherExecutor(pusher_executor.Executor):
    def Do(self, input_dict, output_dict, exec_properties):
        model_push = artifact_utils.get_single_instance(output_dict["pushed_model"])
        blessing = (input_dict.get("model_blessing") or [None])[0]
        if not self.CheckBlessing(input_dict):
            self._MarkNotPushed(model_push)
            reason = blessing.get_string_custom_property("reason") if blessing else ""
            model_push.set_string_custom_property("reason", reason or "not blessed")
            LOGGER.info("not pushed: %s", reason)
            return
        model = artifact_utils.get_single_instance(input_dict["model"])
        destination = pusher_pb2.PushDestination()
        proto_utils.json_to_proto(exec_properties["push_destination"], destination)
        result = push_model(self.GetModelPath(input_dict), destination.filesystem.base_directory,
                            record={"model_id": model.id, "model_uri": model.uri})
        if result.pushed:
            self._MarkPushed(model_push, pushed_destination=result.path,
                             pushed_version=str(result.version))
        else:
            self._MarkNotPushed(model_push)
            model_push.set_string_custom_property("served_version", str(result.version))
        model_push.set_string_custom_property("reason", result.reason)
