"""HedgeMamba stage 1 (``attention_match``): attention rows formed in query blocks equal the whole matrix, the
soft-label CE is the KL plus the teacher rows' entropy, each loss option trains only the feature maps and
lowers its loss, and a bad option is one ConfigError line."""
import pytest
import torch

from relin.config.teacher import TeacherModelConfig
from relin.errors import ConfigError
from relin.models.convert.hedgemamba import hedgehog_from_teacher
from relin.models.teachers import build_teacher
from relin.train.objectives import AttentionMatch, build_objective
from relin.train.objectives.attention_match import attention_row_losses
from relin.train.teacher import FrozenTeacher

TEACHER = TeacherModelConfig(family="gpt_neox", hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=64, rotary_pct=0.5, initializer_range=0.2)


@pytest.fixture(scope="module")
def teacher(tokenizer):
    return build_teacher(TEACHER, tokenizer, seed=0).eval()


def _batch(seed=0, batch=3, steps=23):
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(batch, steps, dtype=torch.long)
    mask[1, 17:] = 0                                  # right padding, as the training batches have
    return {"input_ids": torch.randint(4, 28, (batch, steps), generator=g), "attention_mask": mask}


def _objective(teacher, loss="attention_ce", block=64):
    layers = {f"model.layers.{i}.linear_attn": f"gpt_neox.layers.{i}.attention" for i in range(2)}
    return AttentionMatch(FrozenTeacher(teacher), layers, loss, block)


def test_query_blocks_equal_the_whole_matrix_and_ce_is_kl_plus_entropy(teacher):
    student = hedgehog_from_teacher(teacher)
    layer = student.model.layers[1].linear_attn
    x = torch.randn(2, 23, 32, generator=torch.Generator().manual_seed(1))
    real = torch.ones(2, 23)
    real[1, 15:] = 0
    rope = student.model.rotary(torch.arange(23)[None].expand(2, -1), x.dtype)
    with torch.no_grad():
        ce_blocks, kl_blocks = attention_row_losses(layer, x, rope, real, query_block=5)
        ce_whole, kl_whole = attention_row_losses(layer, x, rope, real, query_block=64)
        torch.testing.assert_close(ce_blocks, ce_whole)
        torch.testing.assert_close(kl_blocks, kl_whole)
        q, k, _, q_rot, k_rot = layer.projections(x, rope)
        logits = torch.einsum("bihd,bjhd->bhij", q_rot, k_rot) * 16 ** -0.5
        allowed = torch.ones(23, 23).tril().bool()[None, None] & real.bool()[:, None, None, :]
        a = logits.masked_fill(~allowed, float("-inf")).softmax(-1)
        entropy = -(a * a.clamp_min(1e-30).log()).sum(-1).mean(1)
    assert (kl_whole[:, 0] == 0).all() and (kl_whole[:, 1:][real[:, 1:].bool()] > 0).all()   # one key: one row
    torch.testing.assert_close(ce_whole[real.bool()], (kl_whole + entropy)[real.bool()], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("loss", ["attention_ce", "output_mse", "cosine"])
def test_each_loss_trains_only_the_feature_maps_and_decreases(teacher, loss):
    student = hedgehog_from_teacher(teacher)
    for name, param in student.named_parameters():
        param.requires_grad_(".feature_map_" in name)
    objective, batch = _objective(teacher, loss, block=8), _batch()
    assert objective.count_targets(batch) == int(batch["attention_mask"].sum()) * 2
    optimizer = torch.optim.Adam([p for p in student.parameters() if p.requires_grad], lr=0.02)
    losses = []
    for _ in range(15):
        out = objective(student, batch)
        optimizer.zero_grad()
        out.loss_sum.backward()
        optimizer.step()
        # the CE holds the teacher rows' entropy, which φ cannot change: its reducible part is the KL
        losses.append(sum(v for k, v in out.sums.items() if k.startswith("attn_kl")).item() if loss == "attention_ce"
                      else out.loss_sum.item())
    assert losses[-1] < 0.8 * losses[0], losses
    assert set(out.sums) == {"match_loss/layer0", "match_loss/layer1", "attn_kl/layer0", "attn_kl/layer1"}
    assert all(p.grad is None for n, p in student.named_parameters() if ".feature_map_" not in n)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for n, p in student.named_parameters()
               if ".feature_map_" in n)


def test_per_layer_metrics_are_means_over_positions(teacher):
    objective = _objective(teacher)
    metrics = objective.finalize({"loss": 1.0, "attn_kl/layer0": 0.25, "match_loss/layer1": 0.5})
    assert metrics == {"loss": 1.0, "attn_kl/layer0": 0.5, "match_loss/layer1": 1.0}


def test_bad_options_are_one_line(teacher):
    with pytest.raises(ConfigError, match="unknown 'xent'"):
        _objective(teacher, loss="xent")
    with pytest.raises(ConfigError, match="query_block: expected >= 1"):
        _objective(teacher, block=0)
    assert "attention_match" in str(pytest.raises(ConfigError, build_objective, "attention_mtch").value)


@pytest.mark.parametrize("loss", ["cosine", "output_mse", "attention_ce"])
def test_each_loss_equals_its_hand_computed_value(teacher, loss):
    """The objective's per-layer loss against the formula on the layer's output and the teacher's: cosine
    1 - cos(y, y_T), MSE mean over features of (y - y_T)², CE -Σ_j A_ij log Â_ij (mean over heads), summed over
    real positions."""

    student = hedgehog_from_teacher(teacher)
    batch = _batch(seed=4)
    objective = _objective(teacher, loss)
    with torch.no_grad():
        out = objective(student, batch)
        reference = objective.teacher(batch)
    real = batch["attention_mask"].bool()
    positions = (batch["attention_mask"].cumsum(-1) - 1).clamp(min=0)
    for i in range(2):
        layer = student.model.layers[i].linear_attn
        x = reference.inputs[f"gpt_neox.layers.{i}.attention"]
        rope = student.model.rotary(positions, x.dtype)
        with torch.no_grad():
            y = layer(x, rope, batch["attention_mask"])[0].float()
            y_t = reference.outputs[f"gpt_neox.layers.{i}.attention"].float()
            q, k, _, q_rot, k_rot = layer.projections(x, rope)
            fq, fk = layer.features(q, k, q_rot, k_rot, real.float())
        if loss == "cosine":
            expected = (1 - (y * y_t).sum(-1) / (y.norm(dim=-1) * y_t.norm(dim=-1)))[real].sum()
        elif loss == "output_mse":
            expected = ((y - y_t) ** 2).mean(-1)[real].sum()
        else:
            steps = x.shape[1]
            allowed = torch.ones(steps, steps).tril().bool()[None, None] & real[:, None, None, :]
            a = (torch.einsum("bihd,bjhd->bhij", q_rot, k_rot) * q_rot.shape[-1] ** -0.5).masked_fill(
                ~allowed, float("-inf")).softmax(-1)
            scores = torch.einsum("bihf,bjhf->bhij", fq, fk) * allowed
            a_hat = scores / scores.sum(-1, keepdim=True)
            expected = (-(a * a_hat.clamp_min(1e-12).log()).sum(-1).mean(1))[real].sum()
        torch.testing.assert_close(out.sums[f"match_loss/layer{i}"], expected, rtol=1e-4, atol=1e-4)
