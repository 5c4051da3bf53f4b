"""``import relin`` registers the hybrid with transformers' Auto classes, whichever is imported first, without
importing transformers itself."""
from __future__ import annotations

import subprocess
import sys
import tempfile

import pytest

from relin.models.hybrid import HybridConfig, HybridForCausalLM

LOAD = "from transformers import AutoModelForCausalLM; print(type(AutoModelForCausalLM.from_pretrained({!r})).__name__)"


@pytest.fixture(scope="module")
def saved_hybrid(tmp_path_factory):
    directory = tmp_path_factory.mktemp("hybrid")
    config = HybridConfig(vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                          num_attention_heads=2, num_key_value_heads=2, head_dim=16, mixer_types=["gdn", "attention"])
    HybridForCausalLM(config).save_pretrained(directory)
    return str(directory)


def python(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter, started outside the checkout (whose kernels/ folder would shadow the
    ``kernels`` package that transformers probes)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=tempfile.gettempdir())


@pytest.mark.parametrize("order", ["relin first", "transformers first"])
def test_import_relin_lets_auto_classes_load_a_saved_hybrid(saved_hybrid, order):
    load = LOAD.format(saved_hybrid)
    code = f"import relin\n{load}" if order == "relin first" else f"import transformers, relin\n{load}"
    result = python(code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "HybridForCausalLM"


def test_without_relin_the_auto_classes_do_not_know_the_hybrid(saved_hybrid):
    assert python(LOAD.format(saved_hybrid)).returncode != 0


def test_import_relin_imports_neither_torch_nor_transformers():
    result = python("import sys, relin; print(sorted({'torch', 'transformers'} & set(sys.modules)))")
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr
