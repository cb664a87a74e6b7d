"""Warm-up requests: assets.extra/tf_serving_warmup_requests, the file TF Serving replays when it
loads a version (a TFRecord of tensorflow_serving.apis PredictionLog protos, one PredictRequest
per record; tensorflow.org/tfx/serving/saved_model_warmup). Without it the first `generate`
after a load pays for the graph's first run (2.5 s vs 0.02 s at tiny).

One request per signature and per batch size the request batcher pads to (BATCHING's
allowed_batch_sizes), so every shape a batched request can take has run once before traffic.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from components.common.errors import BigtrainError
from components.serving.assets import extra_file
from components.serving.batching import BATCHING

WARMUP_FILE = extra_file("tf_serving_warmup_requests")
class WarmupFileError(BigtrainError):
    """The warm-up file is missing, truncated or does not hold PredictionLog records."""


def example_inputs(signature: str, batch: int) -> dict:
    """A request of `batch` rows for one signature: every input shaped [batch, ...]."""
    prompts = np.array([b"def main(", b"import os\n", b"", b"caf\xc3\xa9"] * batch, object)[:batch]
    count = lambda value, dtype: np.full([batch], value, dtype)
    inputs = {
        "serving_default": {"prompt": prompts},
        "generate": {"prompt": prompts, "max_new_tokens": count(2, np.int32)},
        "sample": {"prompt": prompts, "max_new_tokens": count(2, np.int32),
                   "temperature": count(0.8, np.float32), "top_k": count(40, np.int32),
                   "top_p": count(0.95, np.float32), "seed": np.arange(batch, dtype=np.int32),
                   "stop": np.array([b"\n\n\x1f```", b""] * batch, object)[:batch]},   # U+001F-joined
        "score": {"prompt": prompts, "continuation": np.array([b"()"] * batch, object)},
        "token_logits": {"input_ids": np.tile(np.array([[1, 2, 3]], np.int32), [batch, 1])},
    }
    return inputs[signature]


def prediction_logs(signatures, batch_sizes=BATCHING["allowed_batch_sizes"]) -> list:
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2
    logs = []
    for name in signatures:
        for batch in batch_sizes:
            request = predict_pb2.PredictRequest()
            request.model_spec.signature_name = name
            for key, value in example_inputs(name, batch).items():
                request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
            logs.append(prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)))
    return logs


def write_warmup_requests(export_dir: str, signatures, context_length: int) -> str:
    """Write the warm-up file into the SavedModel at export_dir; returns its path."""
    del context_length  # the requests are short enough for any window (4 tokens of ids)
    path = os.path.join(export_dir, WARMUP_FILE)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.TFRecordWriter(path) as writer:
        for log in prediction_logs(signatures):
            writer.write(log.SerializeToString())
    return path


def read_warmup_requests(saved_model_dir: str) -> list[tuple[str, dict]]:
    """[(signature name, {input: numpy array})] from a SavedModel's warm-up file, in file order.
    Raises WarmupFileError naming the file when it is missing or unreadable."""
    from google.protobuf.message import DecodeError
    from tensorflow_serving.apis import prediction_log_pb2
    path = os.path.join(saved_model_dir, WARMUP_FILE)
    if not tf.io.gfile.exists(path):
        raise WarmupFileError(f"no warm-up requests at {path}")
    requests = []
    try:
        for index, record in enumerate(tf.data.TFRecordDataset(path).as_numpy_iterator()):
            log = prediction_log_pb2.PredictionLog.FromString(record)
            if not log.HasField("predict_log"):
                raise WarmupFileError(f"{path}: record {index} is not a PredictLog")
            request = log.predict_log.request
            requests.append((request.model_spec.signature_name,
                             {k: tf.make_ndarray(v) for k, v in request.inputs.items()}))
    except (tf.errors.OpError, DecodeError) as err:
        raise WarmupFileError(f"{path} is not a readable TFRecord of PredictionLog protos "
                              f"({type(err).__name__}: {str(err).splitlines()[0]})") from err
    if not requests:
        raise WarmupFileError(f"{path} holds no requests")
    return requests
