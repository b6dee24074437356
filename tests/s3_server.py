"""A real S3-compatible server on 127.0.0.1 for the tests (moto's server mode, in a thread of the test process):
``s3_server`` starts it, sets the AWS variables a client reads (test credentials, a region) for the tests'
time, and stops it; ``S3Server.bucket_uri()`` gives a fresh bucket's ``s3://`` URI with the server's endpoint in
its query, as ``state.checkpoints.dir`` takes it."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

import pytest

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_REGION": "us-east-1"}


@dataclass
class S3Server:
    endpoint: str  # host:port

    def bucket_uri(self, prefix: str = "checkpoints") -> str:
        """A new, empty bucket (created on first write) and a prefix in it."""
        return (f"s3://barriersim-{uuid.uuid4().hex[:12]}/{prefix}"
                f"?endpoint_override={self.endpoint}&scheme=http&allow_bucket_creation=true")


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
