"""Permission denied on the object store (issue 18, bad input): moto's server with IAM enforced.

The shared S3 server accepts any credentials. moto enforces IAM authentication and authorization
once its count of unauthenticated requests reaches INITIAL_NO_AUTH_ACTION_COUNT (default
infinity); `POST /moto-api/reset-auth` sets that count at run time. So a second moto server of
the objectstore venv is set up without auth (buckets, an object, IAM users with their policies
and access keys), then switched to enforce it from the next request on.

Catches: a forbidden bucket reported as "no files" or as a generic failure (exit 1) instead of
ObjectStoreError (exit 8) naming the URI, a push that leaves objects or a claim behind in a bucket
it may not finish, a version visible without its graph.

One interpreter for these tests alone: tensorflow-io makes its S3 client once per process, with
the S3_ENDPOINT of that moment, so in a process that already used the shared server (any xdist
worker) they would reach that one. test_in_a_fresh_process runs them in a new pytest process; in
the suite's own processes they skip, naming that test."""

import json
import os
import re
import subprocess
import sys
import urllib.request

import pytest

from components.storage import fs
from components.common.errors import EXIT_OBJECT_STORE, ObjectStoreError
from components.storage.listing import list_input_files
from components.push import push
from runners.cli import app as cli
from tests.support.saved_models import fake_saved_model
from tests.support.objectstore import moto_server, use_objectstore

pytestmark = pytest.mark.slow   # a server of its own, TensorFlow's S3 filesystem for the push
FRESH_PROCESS = "BIGTRAIN_TEST_FRESH_S3_PROCESS"
in_fresh_process = pytest.mark.skipif(os.environ.get(FRESH_PROCESS) != "1",
                                      reason="run in a new interpreter by test_in_a_fresh_process")


def test_in_a_fresh_process():
    if os.environ.get(FRESH_PROCESS) == "1":
        pytest.skip("this is the fresh process")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "not fresh_process",
         os.path.relpath(__file__, root)], cwd=root, capture_output=True, text=True,
        env=dict(os.environ, **{FRESH_PROCESS: "1"}), timeout=900)
    assert child.returncode == 0, child.stdout[-6000:] + child.stderr[-3000:]
    assert re.search(r"\b3 passed", child.stdout), child.stdout[-2000:]   # none skipped

ALLOWED, DENIED = "bigtrain-allowed", "bigtrain-denied"
REGION = "us-east-1"


def _policy(*statements):
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def _allow_bucket(bucket):
    return {"Effect": "Allow", "Action": "s3:*",
            "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]}


# user -> its inline policy. `limited`: only ALLOWED (DENIED is implicitly denied); `no-graph`:
# both buckets but never a saved_model.pb (a push that fails on its last object); `admin`: all.
USERS = {
    "limited": _policy(_allow_bucket(ALLOWED)),
    "no-graph": _policy(_allow_bucket(ALLOWED), _allow_bucket(DENIED),
                        {"Effect": "Deny", "Action": "s3:PutObject",
                         "Resource": f"arn:aws:s3:::{DENIED}/*saved_model.pb"}),
    "admin": _policy({"Effect": "Allow", "Action": "*", "Resource": "*"}),
}


@pytest.fixture(scope="module")
def enforcing_store(tmp_path_factory):
    """(endpoint, {user: (access key id, secret)}) of a moto server that enforces IAM."""
    import boto3
    log = str(tmp_path_factory.mktemp("moto") / "moto.log")
    with moto_server(log) as endpoint:
        setup = dict(endpoint_url=endpoint, region_name=REGION, aws_access_key_id="setup",
                     aws_secret_access_key="setup")
        s3, iam = boto3.client("s3", **setup), boto3.client("iam", **setup)
        for bucket in (ALLOWED, DENIED):
            s3.create_bucket(Bucket=bucket)
            s3.put_object(Bucket=bucket, Key="corpus/a.txt", Body=b"some text\n" * 10)
        keys = {}
        for user, policy in USERS.items():
            iam.create_user(UserName=user)
            iam.put_user_policy(UserName=user, PolicyName="bigtrain", PolicyDocument=policy)
            key = iam.create_access_key(UserName=user)["AccessKey"]
            keys[user] = (key["AccessKeyId"], key["SecretAccessKey"])
        urllib.request.urlopen(urllib.request.Request(
            f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST",
            headers={"Content-Type": "text/plain"}), timeout=10)   # not a form: Flask keeps it
        yield endpoint, keys


def as_user(monkeypatch, store, user):
    endpoint, keys = store
    use_objectstore(monkeypatch)   # the other exports (region, S3_USE_HTTPS, ...)
    key_id, secret = keys[user]
    for name, value in {"AWS_ENDPOINT_URL": endpoint, "S3_ENDPOINT": endpoint,
                        "AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret}.items():
        monkeypatch.setenv(name, value)


def objects(store, bucket):
    import boto3
    endpoint, keys = store
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                      aws_access_key_id=keys["admin"][0], aws_secret_access_key=keys["admin"][1])
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


@in_fresh_process
def test_reading_a_forbidden_input_is_exit_8_naming_the_uri(enforcing_store, monkeypatch,
                                                            tmp_path, capsys):
    as_user(monkeypatch, enforcing_store, "limited")
    # The same credentials reach the bucket they may read: the refusal is the policy's.
    fs.check_bucket(f"s3://{ALLOWED}/corpus")
    assert fs.read_bytes(f"s3://{ALLOWED}/corpus/a.txt") == b"some text\n" * 10
    with pytest.raises(ObjectStoreError, match=f"s3://{DENIED}/corpus.*access denied"):
        list_input_files(f"s3://{DENIED}/corpus")
    monkeypatch.chdir(tmp_path)
    code = cli.main(["run", "--home", str(tmp_path / "home"), "--set",
                     f"data.input=s3://{DENIED}/corpus"])
    err = capsys.readouterr().err
    assert code == EXIT_OBJECT_STORE == 8, err
    assert f"s3://{DENIED}/corpus" in err and "access denied" in err, err
    assert not os.path.exists(tmp_path / "s3:")


@in_fresh_process
def test_push_to_a_forbidden_bucket_is_a_named_error_and_publishes_nothing(
        enforcing_store, monkeypatch, tmp_path):
    fake_saved_model(tmp_path / "m", b"model")
    as_user(monkeypatch, enforcing_store, "limited")
    with pytest.raises(ObjectStoreError, match=f"s3://{DENIED}/serving") as err:
        push.push_model(str(tmp_path / "m"), f"s3://{DENIED}/serving/gpt")
    assert err.value.exit_code == EXIT_OBJECT_STORE
    assert objects(enforcing_store, DENIED) == ["corpus/a.txt"]
    assert push.push_model(str(tmp_path / "m"), f"s3://{ALLOWED}/serving/gpt").pushed  # control


@in_fresh_process
def test_push_refused_its_graph_is_a_named_error_and_serves_nothing(enforcing_store, monkeypatch,
                                                                   tmp_path):
    """Every object but saved_model.pb may be written: the push fails on its last object (after
    tensorflow-io's bounded retries), names the URI, publishes no graph (TF Serving loads a version
    the moment its graph appears) and lets go of its digest claim (a later push may try again).

    Not asserted: that the version's other objects are deleted again. Under moto's IAM
    enforcement every ListObjectsV2 whose prefix holds a "/" fails SignatureDoesNotMatch (moto
    re-signs the decoded query; getmoto/moto#5948), so tensorflow-io's exists() on the version's
    folder reads false and the product's rmtree skips it; against a real store it lists."""
    fake_saved_model(tmp_path / "m", b"model")
    as_user(monkeypatch, enforcing_store, "no-graph")
    base = f"s3://{DENIED}/serving/gpt"
    with pytest.raises(ObjectStoreError, match=f"s3://{DENIED}/serving/gpt/[0-9]+/saved_model.pb") as err:
        push.push_model(str(tmp_path / "m"), base)
    assert err.value.exit_code == EXIT_OBJECT_STORE
    left = objects(enforcing_store, DENIED)   # admin, listed without a prefix: moto lists it
    assert not any(key.endswith("saved_model.pb") for key in left), left
    assert not any(key.startswith("serving/gpt/.claims/") and key.endswith(".json")
                   for key in left), left
