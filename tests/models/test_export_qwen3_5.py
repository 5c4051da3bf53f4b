"""The qwen3_5_text export: a tiny hybrid of attention and GDN layers, exported, loaded by stock transformers in a
process that never imports relin, gives relin's logits and relin's greedy tokens; unexportable options are named."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from relin.errors import InputError
from relin.models.export import export_problems, to_qwen3_5
from relin.models.hybrid import HybridConfig, HybridForCausalLM

MIXERS = ["gdn", "attention", "gdn", "gdn", "attention"]

# Runs in a fresh interpreter: stock transformers only.
STOCK = textwrap.dedent("""
    import json, sys
    import torch
    from transformers import AutoModelForCausalLM
    directory, ids_path, out_path = sys.argv[1:]
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    ids = torch.tensor(json.load(open(ids_path)))
    with torch.no_grad():
        logits = model(ids).logits
        tokens = model.generate(ids[:1], attention_mask=torch.ones_like(ids[:1]), max_new_tokens=64,
                                do_sample=False, eos_token_id=None, pad_token_id=0)
    assert not any(name == "relin" or name.startswith("relin.") for name in sys.modules), "relin was imported"
    json.dump({"class": type(model).__name__, "logits": logits.tolist(), "tokens": tokens[0].tolist()},
              open(out_path, "w"))
""")


def tiny_hybrid(seed: int = 0, **gdn) -> HybridForCausalLM:
    config = HybridConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=len(MIXERS),
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, mixer_types=MIXERS,
                          tie_word_embeddings=False, rope_theta=10000.0, max_position_embeddings=256,
                          gdn={"qk_norm": False, **gdn}, eos_token_id=None, pad_token_id=0, kernel_backend="torch")
    torch.manual_seed(seed)
    model = HybridForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):           # away from 1, so the zero-centred storage matters
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            elif "conv" in name:                       # taps other than the identity filter
                p.copy_(0.5 * torch.randn_like(p))
            elif name.endswith("weight"):
                p.normal_(0.0, 0.15)
    return model


def test_exported_model_gives_relins_logits_and_greedy_tokens_in_stock_transformers(tmp_path):
    model = tiny_hybrid()
    exported = to_qwen3_5(model)
    exported.save_pretrained(tmp_path / "export")
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert config["model_type"] == "qwen3_5_text"
    assert config["layer_types"] == ["linear_attention", "full_attention", "linear_attention", "linear_attention",
                                     "full_attention"]
    ids = torch.randint(1, 97, (3, 37), generator=torch.Generator().manual_seed(1))
    (tmp_path / "ids.json").write_text(json.dumps(ids.tolist()))
    subprocess.run([sys.executable, "-c", STOCK, str(tmp_path / "export"), str(tmp_path / "ids.json"),
                    str(tmp_path / "out.json")], check=True, timeout=300, cwd=tmp_path)
    stock = json.loads((tmp_path / "out.json").read_text())
    assert stock["class"] == "Qwen3_5ForCausalLM"
    with torch.no_grad():
        ours = model(ids).logits
        tokens = model.generate(ids[:1], max_new_tokens=64, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert (torch.tensor(stock["logits"]) - ours).abs().max().item() <= 1e-4
    assert stock["tokens"] == tokens[0].tolist()
    assert len(set(stock["tokens"][37:])) > 1, "greedy decoding settled on one token: the comparison is weak"


def test_in_process_export_matches_with_left_padding():
    model = tiny_hybrid(seed=2)
    exported = to_qwen3_5(model)
    ids = torch.randint(1, 97, (2, 21), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(ids)
    mask[1, :6] = 0
    with torch.no_grad():
        ours, theirs = model(ids, attention_mask=mask).logits, exported(ids, attention_mask=mask).logits
    real = mask.bool()
    assert (ours[real] - theirs[real]).abs().max().item() <= 1e-4


@pytest.mark.parametrize("options, named", [
    ({"qk_norm": True}, "gdn.qk_norm"),
    ({"allow_neg_eigval": True}, "gdn.allow_neg_eigval"),
    ({"conv_activation": "none"}, "gdn.conv_activation"),
])
def test_unexportable_gdn_options_are_named_in_one_line(options, named):
    model = tiny_hybrid(**options)
    with pytest.raises(InputError) as err:
        to_qwen3_5(model)
    assert named in str(err.value) and "\n" not in str(err.value)


def test_unexportable_mixers_and_blocks_are_each_named():
    config = HybridConfig(num_hidden_layers=3, mixer_types=["swa", "hedgehog", "gdn"], block="gpt_neox",
                          gdn={"qk_norm": True})
    problems = export_problems(config)
    assert any("block 'gpt_neox'" in p for p in problems)
    assert any("hedgehog" in p and "swa" in p for p in problems)
    assert any("qk_norm" in p for p in problems)
