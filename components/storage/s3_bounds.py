"""The bounds of every S3 request, tensorflow-io's (the AWS C++ SDK) and boto3's (ours and
Beam's) alike: how long to connect, how long to wait for an answer, how many attempts. One set
of environment variables governs both clients (docs/operations.md#object-storage-s3); fs.py
applies them before either client is made."""

from __future__ import annotations

import os

# tensorflow-io's S3 client (the AWS C++ SDK) and boto3 (Beam's S3 client, our own requests) retry
# failed requests with backoff; these bound what one request may cost when the endpoint is
# unreachable (set before either client is made, overridable from the environment). The SDK's
# default ("legacy") retry mode ignores AWS_MAX_ATTEMPTS and retries 10 times (about 25 s per
# request against a stopped server, 51 s per tf.io.gfile call, which makes two requests); the
# "standard" mode honours it: 3 attempts, about 2 to 5 s per call.
S3_CLIENT_DEFAULTS = {"S3_CONNECT_TIMEOUT_MSEC": "5000", "S3_REQUEST_TIMEOUT_MSEC": "60000",
                      "AWS_RETRY_MODE": "standard", "AWS_MAX_ATTEMPTS": "3"}


def bound_s3_retries() -> None:
    """The S3_CLIENT_DEFAULTS into this process's environment (what is set already wins); child
    processes (Beam workers) inherit them."""
    for name, value in S3_CLIENT_DEFAULTS.items():
        os.environ.setdefault(name, value)


def s3_timeouts() -> tuple[float, float, int]:
    """(connect s, request s, attempts) of every S3 request, tensorflow-io's and boto3's alike:
    S3_CONNECT_TIMEOUT_MSEC, S3_REQUEST_TIMEOUT_MSEC and AWS_MAX_ATTEMPTS from the environment,
    S3_CLIENT_DEFAULTS where unset. ConfigError naming a variable that is not a whole number."""
    bound_s3_retries()
    values = []
    for name in ("S3_CONNECT_TIMEOUT_MSEC", "S3_REQUEST_TIMEOUT_MSEC", "AWS_MAX_ATTEMPTS"):
        text = os.environ[name]
        if not text.strip().isdigit() or int(text) < 1:
            from components.config import ConfigError
            raise ConfigError(f"environment variable {name}={text!r}: expected a whole number "
                              f"above 0 (docs/operations.md#object-storage-s3)")
        values.append(int(text))
    return values[0] / 1000, values[1] / 1000, values[2]


def s3_unanswered_bound_s() -> float:
    """The longest one boto3 request waits on an endpoint that accepts connections and never
    answers: each of AWS_MAX_ATTEMPTS attempts waits S3_REQUEST_TIMEOUT_MSEC for a first byte,
    with the standard retry mode's backoff between them (at most 1, 2, 4 ... s, 20 s at most).
    The defaults: 3 x 60 s + 3 s. A run's first S3 request is its bucket check (check_bucket), so
    a run against such an endpoint stops with exit 8 within this bound after it starts."""
    _, request, attempts = s3_timeouts()
    return attempts * request + sum(min(2 ** i, 20) for i in range(attempts - 1))
