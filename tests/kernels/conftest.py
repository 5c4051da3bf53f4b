"""Kernel-test fixtures: NaN-poisoned allocations, a fixed seed per test, fla-style relative-RMS comparison."""
import os

import pytest
import torch

CUDA = torch.cuda.is_available()
# Every test starts from this seed; RELIN_TEST_SEED replays another (each test prints the one it used).
DEFAULT_SEED = 42


def pytest_configure(config):
    """Under pytest-xdist on a multi-GPU host, spread the workers over the GPUs; one CPU thread per worker
    (the fp32 references run on the CPU, and N workers x all-cores threads thrash)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return
    torch.set_num_threads(1)
    if CUDA and torch.cuda.device_count() > 1:
        torch.cuda.set_device(int(worker.removeprefix("gw")) % torch.cuda.device_count())


def gpu(test):
    """Mark a test as needing a CUDA device (marker ``gpu``): it skips on a machine without one."""
    return pytest.mark.gpu(pytest.mark.skipif(not CUDA, reason="needs a CUDA device")(test))


@pytest.fixture(autouse=True)
def nan_poisoned_allocations(monkeypatch):
    """Fill every float ``torch.empty*`` with NaN so an element a kernel never writes fails the test."""
    originals = {name: getattr(torch, name, None) for name in ("empty", "empty_like", "empty_strided")}

    def poisoned(fn):
        def wrapper(*args, **kwargs):
            out = fn(*args, **kwargs)
            if out.is_floating_point():
                out.fill_(float("nan"))
            return out
        return wrapper

    for name, fn in originals.items():
        if fn is not None:
            monkeypatch.setattr(torch, name, poisoned(fn))
    original_new_empty = torch.Tensor.new_empty
    monkeypatch.setattr(torch.Tensor, "new_empty", poisoned(original_new_empty))
    seed = int(os.environ.get("RELIN_TEST_SEED") or DEFAULT_SEED)
    torch.manual_seed(seed)
    print(f"torch seed {seed} (rerun with RELIN_TEST_SEED={seed})")  # shown by pytest on failure
    yield


def assert_close(name: str, ref: torch.Tensor, out: torch.Tensor, ratio: float, err_atol: float = 1e-6):
    """Pass if max|ref-out| <= err_atol, else require rms(ref-out)/rms(ref) < ratio (fla's metric)."""
    ref, out = ref.detach().double().cpu(), out.detach().double().cpu()
    assert ref.shape == out.shape, f"{name}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    assert not torch.isnan(out).any(), f"{name}: NaN in output (an element was never written?)"
    abs_err = (ref - out).abs().max().item()
    if abs_err <= err_atol:
        return
    rel = ((ref - out).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt().clamp_min(1e-30)).item()
    assert rel < ratio, f"{name}: relative RMS error {rel:.3e} >= {ratio} (max abs err {abs_err:.3e})"
