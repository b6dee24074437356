"""The whole suite's settings: the workload cache (``barriersim.workload_cache``) of every run the tests start,
in-process or as a command, lives in a temporary directory of this session (``BARRIERSIM_CACHE_DIR``), never in
the user's ``~/.cache/barriersim``, and is deleted at the end. Tests that assert Spark's phases run with
``--no-cache`` (``cache=False``) or a cache directory of their own, so they start Spark whatever ran before."""

import os
import shutil
import tempfile

_cache_dir: str | None = None


def pytest_configure(config):
    global _cache_dir
    _cache_dir = tempfile.mkdtemp(prefix="barriersim-test-cache-")
    os.environ["BARRIERSIM_CACHE_DIR"] = _cache_dir


def pytest_unconfigure(config):
    if _cache_dir is not None:
        shutil.rmtree(_cache_dir, ignore_errors=True)
