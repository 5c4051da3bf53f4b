"""Test-wide setup: the Triton interpreter on machines without a GPU, offline libraries, and the xdist
schedule around the shared smoke DAG run."""
import os
import tempfile
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    # Must be set before triton is first imported: the kernel tests run through the interpreter.
    os.environ.setdefault("TRITON_INTERPRET", "1")
if os.environ.get("TRITON_INTERPRET") == "1":
    from .triton_interpreter import skip_repatching_inside_kernels

    skip_repatching_inside_kernels()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two workers share the machine's cores with the workflow tests' Snakemake jobs: one thread each avoids
    # oversubscribed OpenMP pools, where tiny ops wait on spinning threads.
    torch.set_num_threads(1)

WORKFLOW = "tests/workflow/"
# The workflow modules that share the session's smoke DAG run (the ``smoke_run`` fixture): one xdist scope.
SMOKE_RUN_MODULES = tuple(f"{WORKFLOW}{name}.py" for name in ("test_smoke_dag", "test_reruns",
                                                               "test_resume", "test_failures"))
# Joins that scope without using the smoke run, so that the two workers end together (none now: the smoke scope,
# with the failure tests beside it, is the longer of the two).
BALANCING_MODULES: tuple[str, ...] = ()


# Set by the ``smoke_run`` fixture (tests/workflow/conftest.py) to its worker's id while the smoke DAG runs. The
# smoke-run tests wait for that DAG, so the other worker's tests then yield the CPU to it: a niced worker still
# takes every idle cycle, and the DAG (two jobs at a time) no longer shares its cores equally with them.
SMOKE_RUNNING = Path(tempfile.gettempdir()) / f"relin-smoke-{os.environ.get('PYTEST_XDIST_TESTRUNUID', 'serial')}"
_yielded = False


def pytest_runtest_setup(item):
    global _yielded
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and not _yielded and SMOKE_RUNNING.is_file() and SMOKE_RUNNING.read_text() != worker:
        os.nice(10)
        _yielded = True


def pytest_collection_modifyitems(items):
    # The workflow tests first: under xdist they are one unit of work (below), the longest, so they start at once.
    items.sort(key=lambda item: not item.nodeid.startswith(WORKFLOW))


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadscope`` with the workflow tests of ``SMOKE_RUN_MODULES`` in one scope: they share one
    session-scoped smoke DAG run, which a second worker would build again (xdist's ``loadgroup`` marks do not group
    under pytest 9). The other workflow modules keep their own scopes, so the second worker takes them meanwhile."""
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WorkflowScope(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            in_scope = nodeid.startswith(SMOKE_RUN_MODULES + BALANCING_MODULES)
            return WORKFLOW if in_scope else super()._split_scope(nodeid)

    return WorkflowScope(config, log)


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face hub cache that ids resolve through (``tests.fake_hub.place_in_cache`` fills it)."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache
