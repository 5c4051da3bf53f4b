"""The log-prob gap between a rollout's sampling path (cache: recurrent Gated DeltaNet steps) and the training
forward (teacher-forced: the chunk kernel): zero where both paths are the same op, bounded over a 1K-token
rollout of a hybrid in fp32, and a rollout runs to its horizon when eos is disabled (issues 48 and 51)."""
import math
import time

import pytest
import torch

from relin.config.teacher import TeacherModelConfig
from relin.models.cache_api import cache_kwargs, output_cache
from relin.models.convert.opal import convert
from relin.models.generation import sample, token_logprobs
from relin.models.logprob_gap import gap_statistics, generated_mask, rollout_logprob_gap
from relin.models.teachers import build_teacher

from ..train.toydata import word_tokenizer

TEACHER = TeacherModelConfig(family="qwen3", hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
                             num_key_value_heads=2, head_dim=16, intermediate_size=64)
HYBRID = ["gdn", "gdn", "gdn", "attention"]


@pytest.fixture(scope="module")
def tokenizer():
    return word_tokenizer()


@pytest.fixture(scope="module")
def teacher(tokenizer):
    return build_teacher(TEACHER, tokenizer, seed=0).eval()


def _prompts(rows=3, width=9, seed=0):
    """Left-padded prompts of 9, 5 and 2 tokens."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 28, (rows, width), generator=g)
    mask = (torch.arange(width) >= torch.tensor([[0], [4], [7]])[:rows]).long()
    return ids * mask, mask


@torch.no_grad()
def _stepwise_logprobs(model, ids, mask, new):
    """The rollout's log-probs recomputed through the sampler's own path: the prompt's prefill, then one
    cached step per token, as :func:`relin.models.generation.sample` runs them."""
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
    logits, cache, logprobs = out.logits[:, -1], output_cache(out), []
    for t in range(new.shape[1]):
        logprobs.append(token_logprobs(logits, new[:, t]))
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], -1)
        positions = positions[:, -1:] + 1
        out = model(input_ids=new[:, t:t + 1], attention_mask=mask, position_ids=positions, use_cache=True,
                    **cache_kwargs(model, cache))
        logits, cache = out.logits[:, -1], output_cache(out)
    return torch.stack(logprobs, 1)


def _sharpened(model, gain=3.0, seed=0):
    """A stand-in for a trained model: weights at unit scale (std 1/√fan_in, embeddings std 1) so that every
    layer moves the residual stream, and the final norm's gain × 3 so that the sampled tokens' mean log-prob is
    about −1.3 nats (a random init at std 0.02 is near uniform, log 1/28 = −3.3, where any gap is trivially
    small)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.normal_(0, 1 / math.sqrt(module.in_features), generator=g)
            elif isinstance(module, torch.nn.Embedding):
                module.weight.normal_(0, 1, generator=g)
        model.model.norm.weight.mul_(gain)
    return model.eval()


def test_sample_returns_the_drawn_tokens_logprobs_without_changing_the_draws(tokenizer, teacher):
    student = convert(teacher, HYBRID).eval()
    ids, mask = _prompts()
    kwargs = dict(attention_mask=mask, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    plain = sample(student, ids, 24, generator=torch.Generator().manual_seed(1), **kwargs)
    new, logprobs = sample(student, ids, 24, generator=torch.Generator().manual_seed(1), return_logprobs=True,
                           **kwargs)
    assert torch.equal(new, plain) and logprobs.dtype == torch.float32 and logprobs.shape == new.shape
    keep = generated_mask(new, tokenizer.eos_token_id)
    assert (~keep).any() and (logprobs[~keep] == 0).all(), "no log-prob after a row's eos"
    assert (logprobs[keep] < 0).all()
    # The sampler's own path recomputed step by step gives the same numbers bit for bit: the bookkeeping
    # (which logits, which token, which step) is exact, and the gap statistics of equal inputs are 0.
    same = gap_statistics(logprobs, _stepwise_logprobs(student, ids, mask, new), keep)
    assert same.mean == 0 and same.max == 0 and (same.seq == 0).all() and same.tokens == int(keep.sum())


@pytest.mark.parametrize("model", ["qwen3", "attention_hybrid"])
def test_gap_is_zero_where_sampling_and_training_are_the_same_op(tokenizer, teacher, model):
    """Softmax attention decodes with the cached keys and values the full forward computes: the same op, so
    the gap is fp32 rounding only (≤ 1e-6), with left-padded prompts and rows stopping at eos."""
    lm = teacher if model == "qwen3" else convert(teacher, ["attention"] * 4).eval()
    ids, mask = _prompts()
    new, logprobs = sample(lm, ids, 64, attention_mask=mask, eos_token_id=tokenizer.eos_token_id,
                           pad_token_id=tokenizer.pad_token_id, generator=torch.Generator().manual_seed(2),
                           return_logprobs=True)
    gap = rollout_logprob_gap(lm, ids, new, logprobs, mask, tokenizer.eos_token_id)
    assert gap.tokens == int(generated_mask(new, tokenizer.eos_token_id).sum()) and gap.tokens > 3
    assert gap.max <= 1e-6 and gap.seq_max <= 1e-5, f"mean {gap.mean:.2e} max {gap.max:.2e} seq {gap.seq_max:.2e}"


def test_gap_over_a_1k_rollout_of_a_hybrid_is_bounded_in_fp32(teacher):
    """Three Gated DeltaNet layers and one attention layer (stage 3's layout), fp32 on the CPU (the torch
    kernels the CPU default ``auto`` runs): 1024 tokens sampled through the recurrent step, rescored by the
    teacher-forced forward (the chunk path). Measured: |Δ log p| mean 1.8e-6, max 5.6e-5, sequence gap ≤ 2.3e-5
    nats over 1024 tokens (mean log p of the sampled tokens −1.33)."""
    student = _sharpened(convert(teacher, HYBRID))
    ids, mask = _prompts(rows=2)
    start = time.perf_counter()
    new, logprobs = sample(student, ids, 1024, attention_mask=mask, generator=torch.Generator().manual_seed(0),
                           return_logprobs=True)
    gap = rollout_logprob_gap(student, ids, new, logprobs, mask)
    print(f"1K rollout, {time.perf_counter() - start:.1f} s: mean log p {logprobs.mean():.3f}, |Δ log p| mean "
          f"{gap.mean:.2e} max {gap.max:.2e}, sequence gap {gap.seq.tolist()}")
    assert gap.tokens == 2 * 1024
    assert float(logprobs.mean()) > -2.0, "sharper than uniform (log 1/28 = -3.3): the gap is not trivially small"
    assert gap.mean <= 1e-4 and gap.max <= 1e-3 and gap.seq_max <= 1e-2


def test_a_rollout_reaches_its_horizon_when_eos_is_disabled(tokenizer, teacher):
    """With no eos every row samples all ``max_new_tokens`` (the student's eos is made the likeliest token,
    so stopping at it would end the rows at once)."""
    student = convert(teacher, HYBRID).eval()
    eos_bias = torch.zeros(len(tokenizer))
    eos_bias[tokenizer.eos_token_id] = 5.0
    handle = student.lm_head.register_forward_hook(lambda module, args, logits: logits + eos_bias)
    try:
        ids, mask = _prompts()
        stopped = sample(student, ids, 40, attention_mask=mask, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, generator=torch.Generator().manual_seed(3))
        assert (generated_mask(stopped, tokenizer.eos_token_id).sum(-1) < 40).all()
        new, logprobs = sample(student, ids, 40, attention_mask=mask, generator=torch.Generator().manual_seed(3),
                               return_logprobs=True)
    finally:
        handle.remove()
    assert new.shape == (3, 40) and (new == tokenizer.eos_token_id).any(), "eos sampled, and sampling went on"
    assert (logprobs < 0).all(), "every one of the 40 positions was drawn, none padded"
    assert generated_mask(new, None).all()
