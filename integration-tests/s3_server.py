"""An S3-compatible server on localhost for the object-store tests: moto's S3
(from PyPI), started and stopped by the tests themselves. The same port serves
moto's DynamoDB, for the external manifest store.

Run as a script it serves one port:  python s3_server.py PORT [LATENCY_MS]

Two things differ from ``moto_server``:
- requests are handled one at a time: moto checks a conditional PUT
  (``If-None-Match: *``) and stores the object in two steps, so two concurrent
  PUTs of one key could both pass the check; real S3 makes that atomic, and the
  commit tests rely on it.
- an optional fixed latency per request (outside the lock, so it does not
  serialize), to stand in for a remote object store;
- it counts the requests it serves, by method (``request_counts()``).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

ACCESS_KEY = "lance-test"
COUNTS_PATH = "/__lance_request_counts"
SECRET_KEY = "lance-test-secret"
REGION = "us-east-1"


def _serve(port: int, latency_ms: float) -> None:
    import logging

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import run_simple

    logging.getLogger("werkzeug").setLevel(logging.WARNING)   # no line per request

    os.environ.setdefault("MOTO_PORT", str(port))
    inner = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()
    counts: dict[str, int] = {}
    detail = os.environ.get("LANCE_S3_COUNT_PATHS") == "1"   # also count by path (diagnosis)

    def app(environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == COUNTS_PATH:     # the requests served so far, by method
            start_response("200 OK", [("Content-Type", "application/json")])
            with lock:
                return [json.dumps(counts).encode()]
        if latency_ms > 0:
            time.sleep(latency_ms / 1000.0)
        with lock:
            method = environ.get("REQUEST_METHOD", "?")
            counts[method] = counts.get(method, 0) + 1
            if detail:
                key = f"{method} {environ.get('PATH_INFO', '')}?{environ.get('QUERY_STRING', '')}"
                counts[key] = counts.get(key, 0) + 1
            return list(inner(environ, start_response))

    run_simple("127.0.0.1", port, app, threaded=True, use_reloader=False, use_debugger=False,
               request_handler=MotoRequestHandler)


# The AWS SDK version the Hadoop release's hadoop-aws is built with (hadoop-project's
# aws-java-sdk-v2.version); its few modules S3A needs replace the 600 MB SDK bundle.
AWS_SDK_FOR_HADOOP = {"3.5.0": "2.35.4", "3.4.2": "2.29.52", "3.4.1": "2.24.6"}


def s3a_jars_conf(dynamodb: bool = False) -> dict[str, str]:
    """spark.jars.packages for S3A matching the Hadoop inside pyspark (from Maven
    Central); with `dynamodb`, the SDK's DynamoDB client too (for the external
    manifest store)."""
    import re

    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    found = [m.group(1) for p in jars.glob("hadoop-client-api-*.jar")
             if (m := re.match(r"hadoop-client-api-(.+)\.jar", p.name))]
    if not found:
        raise RuntimeError(f"no hadoop-client-api jar in {jars}")
    hadoop = found[0]
    sdk = AWS_SDK_FOR_HADOOP.get(hadoop)
    if sdk is None:
        raise RuntimeError(f"pyspark ships Hadoop {hadoop}: add its AWS SDK version to AWS_SDK_FOR_HADOOP")
    return {
        "spark.jars.packages": ",".join([f"org.apache.hadoop:hadoop-aws:{hadoop}",
                                         f"software.amazon.awssdk:s3:{sdk}",
                                         f"software.amazon.awssdk:s3-transfer-manager:{sdk}"]
                                        + ([f"software.amazon.awssdk:dynamodb:{sdk}"] if dynamodb else [])),
        "spark.jars.excludes": "software.amazon.awssdk:bundle",
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class S3Server:
    """A running server; ``stop()`` ends it."""
    port: int
    process: subprocess.Popen
    bucket: str
    log: Path

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, key: str) -> str:
        return f"s3a://{self.bucket}/{key}"

    def spark_conf(self, conditional: bool = True) -> dict[str, str]:
        """S3A settings that point Spark at this server."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": REGION,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
            "spark.hadoop.fs.s3a.secret.key": SECRET_KEY,
            "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            "spark.hadoop.fs.s3a.create.conditional.enabled": str(conditional).lower(),
            "spark.hadoop.fs.s3a.attempts.maximum": "3",
            "spark.hadoop.fs.s3a.retry.limit": "3",
        }

    def storage_options(self) -> dict[str, str]:
        """pylance's options for the same bucket (s3:// URIs)."""
        return {"aws_endpoint": self.endpoint, "aws_access_key_id": ACCESS_KEY,
                "aws_secret_access_key": SECRET_KEY, "aws_region": REGION, "allow_http": "true"}

    def client(self) -> Any:
        import boto3
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def request_counts(self) -> dict[str, int]:
        """Requests the server has served, by HTTP method (GET, HEAD, PUT, ...)."""
        import urllib.request
        with urllib.request.urlopen(self.endpoint + COUNTS_PATH, timeout=30) as r:
            return json.loads(r.read())

    def requests_under(self, prefix: str, action) -> dict[str, int]:
        """The requests `action` made for keys under `prefix`, by kind: LIST, GET, HEAD, PUT, ...
        (needs a server started with count_paths=True, which counts by path too)."""
        def counted() -> dict[str, int]:
            return {k: v for k, v in self.request_counts().items() if " " in k}
        before = counted()
        action()
        after = counted()
        kinds: dict[str, int] = {}
        for key, n in after.items():
            n -= before.get(key, 0)
            method, _, rest = key.partition(" ")
            path, _, query = rest.partition("?")
            if n <= 0 or not (prefix in path or prefix.replace("/", "%2F") in query):
                continue
            kind = "LIST" if method == "GET" and "list-type" in query else method
            kinds[kind] = kinds.get(kind, 0) + n
        return kinds

    def dynamodb(self) -> Any:
        """A DynamoDB client of the same server (moto serves DynamoDB on the same port)."""
        import boto3
        return boto3.client("dynamodb", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def create_commit_table(self, name: str) -> None:
        """A DynamoDB table laid out as the reference's external manifest store wants it."""
        self.dynamodb().create_table(
            TableName=name, BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "base_uri", "KeyType": "HASH"},
                       {"AttributeName": "version", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "base_uri", "AttributeType": "S"},
                                  {"AttributeName": "version", "AttributeType": "N"}])

    def keys(self, prefix: str) -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self.log.unlink(missing_ok=True)


def start(latency_ms: float = 0.0, bucket: str = "lance", timeout: float = 60.0,
          count_paths: bool = False) -> S3Server:
    import tempfile

    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="lance-s3-server-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), str(port), str(latency_ms)],
                            stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1",
                                 **({"LANCE_S3_COUNT_PATHS": "1"} if count_paths else {})})
    server = S3Server(port, proc, bucket, Path(log.name))
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the S3 test server exited: {server.log.read_text()[-2000:]}")
        try:
            server.client().create_bucket(Bucket=bucket)
            return server
        except Exception:  # noqa: BLE001 - not up yet
            if time.monotonic() > deadline:
                server.stop()
                raise
            time.sleep(0.2)


if __name__ == "__main__":
    _serve(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
