"""relin's kernels live in ``relin.kernels`` (``src/relin/kernels``), so nothing in the repository root shadows
Hugging Face's ``kernels`` package: Python started in the root (a notebook, ``python -c``, ``python -m``) loads models
through transformers, which imports it."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *flags, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_python_in_the_repository_root_loads_a_saved_model_through_transformers(tmp_path):
    code = f"""
import kernels
assert "site-packages" in kernels.__file__, kernels.__file__
from kernels import CUDAProperties  # what transformers imports once the package is installed
import torch
from transformers import AutoModelForCausalLM, Qwen3Config, Qwen3ForCausalLM
config = Qwen3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                     num_attention_heads=2, num_key_value_heads=1, head_dim=16)
Qwen3ForCausalLM(config).save_pretrained({str(tmp_path)!r})
model = AutoModelForCausalLM.from_pretrained({str(tmp_path)!r})
print(model(torch.tensor([[1, 2, 3]])).logits.shape)
import relin.kernels
assert relin.kernels.chunk_gated_delta_rule is not None
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "torch.Size([1, 3, 64])" in done.stdout


def test_the_repository_root_holds_no_kernels_package_and_no_stand_in():
    assert not (ROOT / "kernels").exists(), "a top-level kernels/ would shadow Hugging Face's package"
    assert (ROOT / "src" / "relin" / "kernels" / "__init__.py").is_file()
    assert not list((ROOT / "src" / "relin" / "kernels").glob("_shadow*")), "no module hands the name over"
