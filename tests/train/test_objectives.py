"""The shared objectives: chunked distillation equals its formula, the sampled reverse-KL estimator
has the full reverse KL's expected gradient, alignment reads the models through hooks only, one
teacher forward serves every objective of a micro-batch, and accumulation equals one big batch."""
import pytest
import torch

from relin.config.train import TrainConfig
from relin.errors import ConfigError, InputError
from relin.train.loop import train
from relin.train.objectives import Distillation, LayerAlignment, build_objective, chunked_divergence, divergence_sum
from relin.train.teacher import FrozenTeacher

from .test_loop import _batches, _model, _params

DIVERGENCES = ["forward_kl", "reverse_kl", "reverse_kl_sampled"]


@pytest.mark.parametrize("kind", DIVERGENCES)
def test_chunked_divergence_equals_the_unchunked_formula(kind):
    torch.manual_seed(0)
    n, hidden, vocab = 53, 16, 97
    heads = [torch.nn.Linear(hidden, vocab) for _ in range(2)]
    h_s = torch.randn(n, hidden, requires_grad=True)
    h_t = torch.randn(n, hidden)
    targets = torch.randint(0, vocab, (n,))

    full_loss, full_kl = divergence_sum(heads[0](h_s) / 2.0, heads[1](h_t) / 2.0, targets, kind)
    full_loss.backward()
    expected = [h_s.grad.clone(), heads[0].weight.grad.clone()]
    h_s.grad = heads[0].weight.grad = heads[1].weight.grad = heads[1].bias.grad = None
    loss, kl = chunked_divergence(h_s, h_t, heads[0], heads[1], targets, kind, temperature=2.0, chunk_size=8)
    loss.backward()
    torch.testing.assert_close(loss, full_loss, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(kl, full_kl, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(h_s.grad, expected[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(heads[0].weight.grad, expected[1], rtol=1e-5, atol=1e-6)
    assert heads[1].weight.grad is None, "the teacher head never receives a gradient"


def test_kl_is_zero_between_equal_distributions_and_positive_otherwise():
    logits = torch.randn(10, 7)
    for kind in ("forward_kl", "reverse_kl"):
        assert divergence_sum(logits, logits, torch.zeros(10, dtype=torch.long), kind)[1].abs().max() < 1e-6
        assert divergence_sum(logits, logits.flip(-1), torch.zeros(10, dtype=torch.long), kind)[1].sum() > 0.1


def test_sampled_estimator_has_the_reverse_kl_gradient_in_expectation():
    torch.manual_seed(1)
    student, teacher = torch.randn(1, 6, requires_grad=True), torch.randn(1, 6)
    divergence_sum(student, teacher, torch.zeros(1, dtype=torch.long), "reverse_kl")[0].backward()
    exact, student.grad = student.grad.clone(), None
    draws = 40000
    samples = torch.distributions.Categorical(logits=student.detach()).sample((draws,)).squeeze(-1)
    loss, kl = divergence_sum(student.expand(draws, 6), teacher.expand(draws, 6), samples, "reverse_kl_sampled")
    (loss / draws).backward()
    torch.testing.assert_close(student.grad, exact, rtol=0.05, atol=0.01)
    reverse_kl = divergence_sum(student, teacher, samples[:1], "reverse_kl")[1]
    assert abs(kl.mean().item() - reverse_kl.item()) < 0.05, "the estimate's mean is the reverse KL"


def _align(teacher_model, names=("model.layers.0.self_attn",), **kw):
    return LayerAlignment(FrozenTeacher(teacher_model), list(names), **kw)


def test_alignment_of_a_model_to_itself_is_zero_and_teacher_inputs_isolate_layers(tokenizer):
    teacher = _model(tokenizer, num_hidden_layers=2, seed=1)
    batch = _batches(tokenizer, 4).micro_batches(1, 1)[0]
    names = ["model.layers.0.self_attn", "model.layers.1.self_attn"]
    same = _model(tokenizer, num_hidden_layers=2, seed=1)
    for loss in ("mse", "cosine"):
        assert _align(teacher, names, loss=loss)(same, batch).loss_sum.abs() < 1e-5
    # A student whose first layer differs: on the teacher's inputs layer 1 still matches exactly.
    student = _model(tokenizer, num_hidden_layers=2, seed=1)
    torch.nn.init.normal_(student.model.layers[0].self_attn.o_proj.weight)
    isolated = _align(teacher, ["model.layers.1.self_attn"], inputs="teacher")(student, batch).loss_sum
    chained = _align(teacher, ["model.layers.1.self_attn"], inputs="own")(student, batch).loss_sum
    assert isolated.abs() < 1e-5 < chained


def test_one_teacher_forward_serves_every_objective_of_a_batch(tokenizer):
    teacher = FrozenTeacher(_model(tokenizer, seed=1))
    calls = []
    teacher.module.model.register_forward_hook(lambda *a: calls.append(1))
    kd = Distillation(teacher)
    align = LayerAlignment(teacher, ["model.layers.0.self_attn"])
    student = _model(tokenizer)
    batch = _batches(tokenizer, 4).micro_batches(1, 1)[0]
    kd(student, batch)
    align(student, batch)
    assert len(calls) == 1
    kd(student, dict(batch))
    assert len(calls) == 2, "another batch, another forward"
    assert not any(p.requires_grad for p in teacher.module.parameters()) and not teacher.module.training


def test_alignment_accumulated_over_micro_batches_equals_one_big_batch(tokenizer, tmp_path):
    teacher = _model(tokenizer, seed=7)
    common = dict(steps=3, lr=1e-2, warmup_steps=0, checkpoint_every=100, clip_grad_norm=0.5)
    runs = []
    for batch_size, accum in ((16, 1), (4, 4)):
        objective = _align(teacher, ["model.layers.0.self_attn", "model.layers.0.mlp"], inputs="own")
        runs.append(train(_model(tokenizer), objective, _batches(tokenizer, batch_size),
                          TrainConfig(batch_size=batch_size, grad_accum=accum, **common),
                          checkpoint_root=tmp_path / str(accum), progress=False))
    big, accum = runs
    assert big.history[-1]["loss"] == pytest.approx(accum.history[-1]["loss"], rel=1e-5)
    torch.testing.assert_close(_params(accum.model), _params(big.model), rtol=1e-5, atol=1e-6)


def test_distillation_moves_the_student_towards_the_teacher(tokenizer, tmp_path):
    teacher = FrozenTeacher(_model(tokenizer, seed=3))
    cfg = TrainConfig(steps=40, batch_size=16, lr=1e-2, warmup_steps=0, log_every=10, checkpoint_every=1000)
    result = train(_model(tokenizer), Distillation(teacher, "reverse_kl", chunk_size=32), _batches(tokenizer, 16),
                   cfg, checkpoint_root=tmp_path, progress=False)
    assert result.history[-1]["kl"] < 0.5 * result.history[0]["kl"]


def test_unknown_objective_and_missing_batch_keys_are_one_line(tokenizer):
    with pytest.raises(ConfigError, match="objective: unknown 'kl' "):
        build_objective("kl")
    with pytest.raises(InputError, match=r"^objective ce: the batches lack labels \(it needs"):
        build_objective("ce").check_batch({"input_ids": 0, "attention_mask": 0})


def test_row_mean_ce_weighs_every_row_alike_and_equals_ce_when_rows_hold_as_many_targets(tokenizer):
    """``ce_row_mean``: the mean over rows of each row's mean token loss (a 1-target row counts as much as a 5-target
    one), against a loop over rows; with equal target counts per row it is ``ce`` exactly; rows without a target
    are neither counted nor scored."""
    import torch.nn.functional as F

    model = _model(tokenizer)
    ids = torch.randint(4, model.config.vocab_size, (3, 8), generator=torch.Generator().manual_seed(0))
    labels = torch.full_like(ids, -100)
    labels[0, 7] = ids[0, 7]                      # one target
    labels[1, 3:] = ids[1, 3:]                    # five targets
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}   # row 2: none
    ce, row_mean = build_objective("ce"), build_objective("ce_row_mean")
    assert row_mean.count_targets(batch) == 2 and ce.count_targets(batch) == 6
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=batch["attention_mask"]).logits.float()
        expected = sum(F.cross_entropy(logits[r, :-1][labels[r, 1:] != -100], labels[r, 1:][labels[r, 1:] != -100])
                       for r in (0, 1))
        assert torch.allclose(row_mean(model, batch).loss_sum, expected, rtol=1e-5)
        even = dict(batch, labels=torch.where(torch.arange(8) >= 6, ids, -100))            # two targets per row
        assert torch.allclose(row_mean(model, even).loss_sum * 2, ce(model, even).loss_sum, rtol=1e-5)
