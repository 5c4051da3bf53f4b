"""Fixtures of the tests that materialise checkpoints rows from installed packages (GGUF and ONNX)."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _no_progress_bars():
    """transformers' bars, which a relin process turns off before importing it (relin.logs.quiet_libraries), stay on
    in this test process: off here, so stderr is what a user sees."""
    from transformers.utils import logging

    enabled = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    yield
    if enabled:
        logging.enable_progress_bar()


@pytest.fixture
def cli(monkeypatch, capsys):
    """The CLI in-process with tracking off; returns (exit code, stderr)."""
    monkeypatch.setenv("RELIN_TRACKING", "0")

    def run(name: str, cfg: dict, out: Path) -> tuple[int, str]:
        from .test_pretrained_checkpoint import materialise

        code = materialise(name, cfg, out)
        return code, capsys.readouterr().err
    return run


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """An empty site-packages folder on ``sys.path`` (importlib.metadata finds distributions there)."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder
