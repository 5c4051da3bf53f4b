"""Small data configs (the CI overlay's ``data`` section) and a session-wide tokenizer + dataset."""
import random
from pathlib import Path

import pytest
import yaml

from relin.cli import main
from relin.config.data import DataConfig
from relin.config.loader import build

SMOKE = Path(__file__).resolve().parents[2] / "workflow" / "configs" / "smoke.yaml"


def _small_config(**overrides) -> DataConfig:
    data = {**yaml.safe_load(SMOKE.read_text())["data"], **overrides}
    return build(DataConfig, data, "data")


@pytest.fixture(scope="session")
def small_config():
    """Build the CI overlay's data config with top-level ``data`` keys overridden."""
    return _small_config


@pytest.fixture(scope="session")
def seed() -> int:
    return random.SystemRandom().randrange(1 << 30)


@pytest.fixture(scope="session")
def small(seed):
    """``(cfg, DatasetDict, tokenizer)`` of the CI-sized config at a fresh seed."""
    from relin.data.synth_text import build_synth_text

    cfg = _small_config(seed=seed)
    data, tokenizer = build_synth_text(cfg)
    return cfg, data, tokenizer


@pytest.fixture
def relin(monkeypatch, capsys):
    """Run the ``relin`` CLI in-process with tracking off; returns (exit code, stderr)."""
    monkeypatch.setenv("RELIN_TRACKING", "0")

    def run(*args: str) -> tuple[int, str]:
        code = main(list(args))
        return code, capsys.readouterr().err
    return run
