"""The hybrid's static decode path (``StaticHybridCache``): prefilling in chunks and decoding token by
token through preallocated, in-place buffers gives the logits of the dynamic cache and of one full
forward (attention, a sliding window with sinks shorter than the sequence, Gated DeltaNet), the
buffers keep their addresses (what a captured CUDA graph needs), and types without a static path
are refused."""
import pytest
import torch

from relin.config.opal import SWAConfig
from relin.config.teacher import TeacherModelConfig
from relin.layers.attention import attention_mask, static_attention_mask
from relin.models.convert.opal import convert
from relin.models.generation import sample
from relin.models.hybrid import StaticHybridCache
from relin.models.static_sampler import StaticSampler
from relin.models.teachers import build_teacher

from ..train.toydata import word_tokenizer

TEACHER = TeacherModelConfig(family="qwen3", hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                             num_key_value_heads=2, head_dim=16, intermediate_size=64)
MIXED = ["gdn", "swa", "gdn", "attention"]


@pytest.fixture(scope="module")
def hybrid():
    teacher = build_teacher(TEACHER, word_tokenizer(), seed=0).eval()
    model = convert(teacher, MIXED, swa=SWAConfig(window=5, sinks=2), kernel_backend="torch").eval()
    with torch.no_grad():  # non-trivial conv filters, so the conv states matter
        for layer in model.model.layers:
            if layer.kind == "gdn":
                for conv in (layer.linear_attn.q_conv, layer.linear_attn.k_conv, layer.linear_attn.v_conv):
                    conv.weight.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(1))
    return model


def _ids(batch=2, steps=17):
    return torch.randint(4, 28, (batch, steps), generator=torch.Generator().manual_seed(0))


def test_static_mask_equals_the_dynamic_mask_on_unpadded_rows():
    for window, sinks in ((None, 0), (3, 1)):
        dynamic = attention_mask(torch.ones(1, 9, dtype=torch.long), 4, window, sinks)   # queries 5..8
        static = static_attention_mask(torch.tensor(5), 4, 12, window, sinks)
        assert torch.equal(static[..., :9], dynamic)
        assert not static[..., 9:].any()        # slots beyond the last query stay hidden


@torch.no_grad()
def test_static_decoding_matches_dynamic_cache_and_full_forward(hybrid):
    ids = _ids()
    full = hybrid(ids).logits
    cache = StaticHybridCache.allocate(hybrid, batch=2, max_length=24)
    addresses = [t.data_ptr() for s in cache.states for t in vars(s).values() if isinstance(t, torch.Tensor)]
    dynamic, static = None, []
    prefill = 9
    for start, stop in ((0, 4), (4, prefill)):                    # a chunked prefill
        out = hybrid(ids[:, start:stop], cache=cache, use_cache=True)
        static.append(out.logits)
    assert out.cache is cache and int(cache.length) == prefill
    dyn = hybrid(ids[:, :prefill], use_cache=True)
    dynamic, dyn_logits = dyn.cache, [dyn.logits]
    for t in range(prefill, ids.shape[1]):                       # token-by-token decode
        static.append(hybrid(ids[:, t:t + 1], cache=cache, use_cache=True).logits)
        step = hybrid(ids[:, t:t + 1], cache=dynamic, use_cache=True)
        dynamic = step.cache
        dyn_logits.append(step.logits)
    static, dyn_logits = torch.cat(static, 1), torch.cat(dyn_logits, 1)
    torch.testing.assert_close(static, full, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(static, dyn_logits, rtol=1e-4, atol=1e-4)
    assert int(cache.length) == ids.shape[1]
    assert [t.data_ptr() for s in cache.states for t in vars(s).values()
            if isinstance(t, torch.Tensor)] == addresses
    held = cache.nbytes()
    assert held["kv"] == 2 * 2 * (2 * 2 * 24 * 16) * 4          # 2 softmax layers, K and V, fp32
    assert held["recurrent"] > 0

    cache.reset()                                                 # reuse: same logits from scratch
    assert int(cache.length) == 0
    again = hybrid(ids[:, :prefill], cache=cache, use_cache=True).logits
    torch.testing.assert_close(again, full[:, :prefill], rtol=1e-4, atol=1e-4)


@torch.no_grad()
def test_static_decoding_keeps_a_bf16_model_in_bf16(hybrid):
    model = hybrid.to(torch.bfloat16)
    try:
        ids = _ids(steps=6)
        cache = StaticHybridCache.allocate(model, batch=2, max_length=8)
        model(ids[:, :5], cache=cache, use_cache=True)
        logits = model(ids[:, 5:], cache=cache, use_cache=True).logits
        assert logits.dtype == torch.bfloat16
        torch.testing.assert_close(logits, model(ids).logits[:, 5:], rtol=0.05, atol=0.05)
    finally:
        hybrid.float()


def test_static_cache_refuses_padding_and_unsupported_types(hybrid):
    cache = StaticHybridCache.allocate(hybrid, batch=2, max_length=8)
    with pytest.raises(ValueError, match="pad_left"):
        hybrid(_ids(steps=3), attention_mask=torch.ones(2, 3), cache=cache, use_cache=True)
    hybrid.config.mixer_types[0] = "hedgemamba"
    try:
        with pytest.raises(NotImplementedError, match="hedgemamba"):
            StaticHybridCache.allocate(hybrid, batch=2, max_length=8)
    finally:
        hybrid.config.mixer_types[0] = "gdn"


def _left_padded(pad=0):
    """Two prompts, of 9 and 5 real tokens, the short one left-padded, and their mask."""
    ids = _ids(steps=9)
    ids[1, :4] = pad
    mask = (torch.arange(9) >= torch.tensor([[0], [4]])).long()
    return ids, mask


@torch.no_grad()
def test_left_padded_static_prefill_and_decode_match_the_dynamic_cache(hybrid):
    """Padded slots are neither attended (attention, and SWA whose sinks are a row's first real tokens) nor
    folded into the Gated DeltaNet state, and positions count real tokens: the logits of every real
    position and of each decode step equal the dynamic cache's under the same attention mask."""
    ids, mask = _left_padded()
    dyn = hybrid(ids, attention_mask=mask, use_cache=True)
    cache = StaticHybridCache.allocate(hybrid, batch=2, max_length=16)
    cache.pad_left(mask)
    static = hybrid(ids, cache=cache, use_cache=True).logits
    real = mask.bool()
    torch.testing.assert_close(static[real], dyn.logits[real], rtol=1e-4, atol=1e-4)
    dynamic, full_mask = dyn.cache, mask
    for token in _ids(steps=4).T:
        full_mask = torch.cat([full_mask, torch.ones(2, 1, dtype=torch.long)], 1)
        positions = full_mask.sum(-1, keepdim=True) - 1
        step = hybrid(token[:, None], attention_mask=full_mask, position_ids=positions, cache=dynamic, use_cache=True)
        dynamic = step.cache
        torch.testing.assert_close(hybrid(token[:, None], cache=cache, use_cache=True).logits, step.logits,
                                   rtol=1e-4, atol=1e-4)
    cache.reset()
    assert int(cache.start.abs().sum()) == 0


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_static_sampler_draws_what_the_dynamic_sampler_draws(hybrid, temperature):
    """Same prompts, same generator seed: the static sampler (eager here; graphed on CUDA in
    tests/kernels/test_cuda_graphs.py) returns the dynamic sampler's tokens, and reusing it gives them again."""
    ids, mask = _left_padded()
    kwargs = dict(attention_mask=mask, eos_token_id=3, pad_token_id=0, temperature=temperature)
    expected = sample(hybrid, ids, 7, generator=torch.Generator().manual_seed(5), **kwargs)
    sampler = StaticSampler(hybrid, batch=2, max_length=20, graph=False)
    for _ in range(2):
        got = sampler.sample(ids, 7, generator=torch.Generator().manual_seed(5), **kwargs)
        assert torch.equal(got, expected)
    with pytest.raises(ValueError, match="expected 2 rows of prompt \\+ continuation <= 20 tokens"):
        sampler.sample(ids, 12, **kwargs)


def _set_backend(model, backend):
    for layer in model.model.layers:
        getattr(layer, layer.mixer_name).backend = backend


@pytest.mark.parametrize("trainable", [False, True])
@torch.no_grad()
def test_fused_decode_step_on_the_triton_kernels_matches_the_torch_path(hybrid, monkeypatch, trainable):
    """The one-token step's kernels (the short-conv step, the gates, the in-place recurrent step, the norms fused
    with the residual add and the gate; projections stacked when the weights are frozen) under the Triton
    interpreter give the PyTorch path's logits, token after token, from a prompt fed one token at a time with its
    left padding."""
    hybrid.requires_grad_(trainable)
    ids = _ids(steps=6)
    mask = (torch.arange(6) >= torch.tensor([[0], [2]])).long()       # the second row's first 2 slots are padding
    logits = {}
    for backend in ("torch", "triton"):
        monkeypatch.setenv("RELIN_KERNEL_BACKEND", backend)
        _set_backend(hybrid, backend)
        cache = StaticHybridCache.allocate(hybrid, batch=2, max_length=8)
        cache.pad_left(mask)
        logits[backend] = torch.cat([hybrid(ids[:, t:t + 1], cache=cache, use_cache=True).logits
                                     for t in range(ids.shape[1])], 1)
    _set_backend(hybrid, "torch")
    hybrid.requires_grad_(True)
    real = mask.bool()
    torch.testing.assert_close(logits["triton"][real], logits["torch"][real], rtol=1e-4, atol=1e-4)
    dyn = hybrid(ids, attention_mask=mask).logits
    torch.testing.assert_close(logits["torch"][real], dyn[real], rtol=1e-4, atol=1e-4)
