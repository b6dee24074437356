"""A real S3-compatible server on 127.0.0.1 for the tests (moto's server mode, in a thread of the test process):
``s3_server`` starts it, sets the AWS variables a client reads (test credentials, a region) for the tests'
time, and stops it; ``S3Server.bucket_uri()`` gives a fresh bucket's ``s3://`` URI with the server's endpoint in
its query, as ``state.checkpoints.dir`` takes it; ``versioned_bucket_uri()`` one whose bucket keeps every object
ever written, and ``written_keys()`` lists them (what a run wrote, even after it discarded it)."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

import pytest

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


@dataclass
class S3Server:
    endpoint: str  # host:port

    def bucket_uri(self, prefix: str = "checkpoints") -> str:
        """A new, empty bucket (created on first write) and a prefix in it."""
        return (
            f"s3://barriersim-{uuid.uuid4().hex[:12]}/{prefix}"
            f"?endpoint_override={self.endpoint}&scheme=http&allow_bucket_creation=true"
        )

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=f"http://{self.endpoint}")

    def versioned_bucket_uri(self, prefix: str = "checkpoints") -> str:
        """A new bucket that keeps every version of every object, deleted ones too (``written_keys``)."""
        uri = self.bucket_uri(prefix)
        bucket = uri.split("/")[2]
        self.client().create_bucket(Bucket=bucket)
        self.client().put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        return uri

    def written_keys(self, uri: str) -> set[str]:
        """Every key ever written to the versioned bucket of ``uri``, deleted or not."""
        pages = self.client().get_paginator("list_object_versions").paginate(Bucket=uri.split("/")[2])
        return {v["Key"] for page in pages for v in page.get("Versions", [])}


@pytest.fixture(scope="module")
def s3_server():
    from moto.server import ThreadedMotoServer

    previous = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield S3Server(f"{host}:{port}")
    finally:
        server.stop()
        for k, v in previous.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
