"""The whole suite's settings: the workload cache (``barriersim.workload_cache``) of every run the tests start,
in-process or as a command, lives in a temporary directory of this session (``BARRIERSIM_CACHE_DIR``), never in
the user's ``~/.cache/barriersim``, and is deleted at the end. Tests that assert Spark's phases run with
``--no-cache`` (``cache=False``) or a cache directory of their own, so they start Spark whatever ran before.
Hypothesis's wall-clock checks are off for every property (the ``too_slow`` health check: generating the first
examples took long; the per-example ``deadline``): they fail on a loaded machine, and say nothing about the code.
The ``s3_server`` fixture (``tests.s3_server``) is shared from here."""

import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings

from tests.s3_server import s3_server  # noqa: F401 - the local S3 server fixture, for every test that asks for it

settings.register_profile("barriersim", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("barriersim")

_cache_dir: str | None = None


def pytest_configure(config):
    global _cache_dir
    _cache_dir = tempfile.mkdtemp(prefix="barriersim-test-cache-")
    os.environ["BARRIERSIM_CACHE_DIR"] = _cache_dir


def pytest_unconfigure(config):
    if _cache_dir is not None:
        shutil.rmtree(_cache_dir, ignore_errors=True)
