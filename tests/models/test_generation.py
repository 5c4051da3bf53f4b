"""Greedy generation with the KV cache equals recomputing the full sequence at every step."""
import pytest
import torch

from relin.config.teacher import TeacherModelConfig
from relin.models.generation import generate
from relin.models.teachers import build_teacher

from ..train.toydata import word_tokenizer


def _no_cache_greedy(model, ids, steps):
    out = []
    for _ in range(steps):
        token = model(input_ids=ids).logits[:, -1].argmax(-1)
        out.append(token)
        ids = torch.cat([ids, token[:, None]], 1)
    return torch.stack(out, 1)


@pytest.mark.parametrize("family", ["qwen3", "gpt_neox"])
def test_cached_greedy_matches_recompute_and_left_padding(family):
    tokenizer = word_tokenizer()
    torch.manual_seed(0)
    model = build_teacher(TeacherModelConfig(family=family, hidden_size=32, head_dim=8), tokenizer,
                          seed=int(torch.randint(0, 1000, ()))).eval()
    long, short = torch.randint(4, 28, (1, 9)), torch.randint(4, 28, (1, 5))
    expect_long, expect_short = _no_cache_greedy(model, long, 6), _no_cache_greedy(model, short, 6)
    assert torch.equal(generate(model, long, 6), expect_long)
    pad = tokenizer.pad_token_id
    batch = torch.cat([long, torch.cat([torch.full((1, 4), pad), short], 1)])
    mask = (torch.arange(9) >= torch.tensor([[0], [4]])).long()
    got = generate(model, batch, 6, attention_mask=mask)
    assert torch.equal(got, torch.cat([expect_long, expect_short]))


def test_stops_at_eos_and_pads_after():
    tokenizer = word_tokenizer()
    model = build_teacher(TeacherModelConfig(family="qwen3", hidden_size=32, head_dim=8), tokenizer).eval()
    eos_bias = torch.zeros(len(tokenizer))
    eos_bias[tokenizer.eos_token_id] = 1e4
    model.lm_head.register_forward_hook(lambda module, args, logits: logits + eos_bias)
    ids = torch.randint(4, 28, (2, 5))
    out = generate(model, ids, 4, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    assert out.shape == (2, 4)
    assert out[:, 0].tolist() == [tokenizer.eos_token_id] * 2 and (out[:, 1:] == tokenizer.pad_token_id).all()


def test_rejects_one_dimensional_prompts():
    model = build_teacher(TeacherModelConfig(family="qwen3", hidden_size=32, head_dim=8), word_tokenizer())
    with pytest.raises(ValueError, match=r"expected \[B, T\]"):
        generate(model, torch.tensor([1, 2, 3]), 2)
