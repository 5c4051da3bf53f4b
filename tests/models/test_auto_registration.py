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
    """``code`` in a fresh interpreter, started outside the checkout (as an installed relin is used)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=tempfile.gettempdir())


def test_import_relin_imports_nothing_heavy_and_then_lets_auto_classes_load_a_saved_hybrid(saved_hybrid):
    code = ("import sys, relin\n"
            "assert not {'torch', 'transformers'} & set(sys.modules), 'import relin imported torch or transformers'\n"
            + LOAD.format(saved_hybrid))
    result = python(code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "HybridForCausalLM"


def test_relin_imported_after_transformers_registers_at_once(saved_hybrid):
    result = python(f"import transformers, relin\n{LOAD.format(saved_hybrid)}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "HybridForCausalLM"


def test_transformers_alone_does_not_know_the_hybrid():
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    assert "relin_hybrid" not in CONFIG_MAPPING_NAMES


def test_the_cli_skips_the_pending_registration():
    """Stages import the model modules they load with; one that needs only a tokenizer pays nothing more."""
    result = python("import sys, relin, relin.cli\nrelin._auto.cancel_pending()\nimport transformers\n"
                    "print('relin.models.hybrid' in sys.modules)")
    assert result.returncode == 0 and result.stdout.strip() == "False", result.stdout + result.stderr
