"""The ops inside a captured CUDA graph: forward and backward captured once, replayed on new inputs, equal to eager.

A training step built on the ops can then be captured: no host synchronization, allocation outside the graph's
pool or launch-time decision that depends on tensor values may happen inside them.
"""
import math
import os

import pytest
import torch
import torch.nn.functional as F

from relin.kernels import chunk_decayed_linear_attn, chunk_gated_delta_rule, multiscale_diag_retention

from .conftest import assert_close, gpu

B, T, H = 2, 200, 2


def gdn(x):
    return chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], x["beta"], backend="triton")[0]


def gdn_segments(x):
    """The gated delta rule with its serial passes on segments of one chunk (carry, resolve, segmented passes)."""
    os.environ["RELIN_GDN_CP"] = "1"
    try:
        return gdn(x)
    finally:
        os.environ.pop("RELIN_GDN_CP")


def dla(x):
    return chunk_decayed_linear_attn(x["q"], x["k"], x["v"], x["g"], backend="triton")[0]


def hedgehog(x):
    return chunk_decayed_linear_attn(x["q"].softmax(-1), x["k"].softmax(-1), x["v"], normalize=True,
                                     backend="triton")[0]


def msr(x):
    log_decays = torch.linspace(math.log(0.7), math.log(0.995), x["mix"].shape[-1], device=x["q"].device)
    return multiscale_diag_retention(x["q"], x["k"], x["v"], x["gate"], x["mix"], log_decays, block_len=64,
                                     backend="triton")[0]


def new_inputs(op):
    r = lambda *shape: torch.randn(*shape, device="cuda")  # noqa: E731
    if op is msr:
        x = dict(q=r(B, T, 96), k=F.elu(r(B, T, 96)) + 1, v=r(B, T, 96), gate=r(B, T, 96).sigmoid(),
                 mix=r(B, T, 4).softmax(-1))
    else:
        x = dict(q=r(B, T, H, 64), k=F.normalize(r(B, T, H, 64), dim=-1), v=r(B, T, H, 48),
                 g=F.logsigmoid(r(B, T, H)), beta=r(B, T, H).sigmoid())
        if op not in (gdn, gdn_segments):
            del x["beta"]
        if op is hedgehog:
            del x["g"]
    return {name: t.to(torch.bfloat16) if name != "g" else t for name, t in x.items()}


@gpu
@pytest.mark.parametrize("op", [gdn, gdn_segments, dla, hedgehog, msr],
                         ids=["gdn", "gdn_segments", "dla", "hedgehog", "msr"])
def test_captured_fwd_bwd_replays_like_eager(op):
    static = {name: t.requires_grad_() for name, t in new_inputs(op).items()}
    do = torch.randn_like(op(static))

    def step():
        return torch.autograd.grad(op(static), list(static.values()), do)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # compile and autotune outside the capture
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()

    for _ in range(2):
        fresh = new_inputs(op)
        with torch.no_grad():
            for name, t in fresh.items():
                static[name].copy_(t)
            do.copy_(torch.randn_like(do))
        graph.replay()
        eager = step()
        torch.cuda.synchronize()
        for name, got, want in zip(static, captured, eager):
            assert_close(f"d{name}", want, got, 1e-6)


@gpu
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_graphed_rollout_sampler_draws_what_the_eager_one_draws(temperature):
    """OPAL's rollouts on a GPU: the decode step of a hybrid (attention, SWA with sinks, Gated DeltaNet on the
    Triton kernels) replayed from a CUDA graph samples the eager static sampler's tokens from left-padded
    prompts, and a second call (graph reused) does again."""
    from relin.config.opal import SWAConfig
    from relin.config.teacher import TeacherModelConfig
    from relin.models.convert.opal import convert
    from relin.models.static_sampler import StaticSampler
    from relin.models.teachers import build_teacher

    from ..train.toydata import word_tokenizer

    teacher = build_teacher(TeacherModelConfig(family="qwen3", hidden_size=64, num_hidden_layers=4,
                                               num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                               intermediate_size=128), word_tokenizer(), seed=0)
    model = convert(teacher, ["gdn", "swa", "gdn", "attention"], swa=SWAConfig(window=5, sinks=2),
                    kernel_backend="triton").cuda().eval()
    ids = torch.randint(4, 28, (4, 11), device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    mask = (torch.arange(11, device="cuda") >= torch.tensor([[0], [3], [6], [1]], device="cuda")).long()
    kwargs = dict(attention_mask=mask, eos_token_id=3, pad_token_id=0, temperature=temperature)
    eager = StaticSampler(model, batch=4, max_length=48, graph=False)
    graphed = StaticSampler(model, batch=4, max_length=48, graph=True)
    for seed in (1, 2):
        expected = eager.sample(ids, 30, generator=torch.Generator("cuda").manual_seed(seed), **kwargs)
        got = graphed.sample(ids, 30, generator=torch.Generator("cuda").manual_seed(seed), **kwargs)
        assert graphed.graph is not None
        assert torch.equal(got, expected)
