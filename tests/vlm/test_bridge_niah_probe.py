"""The bridge-isolated NIAH probe trains through the one loop: a killed run resumes to the uninterrupted result."""
import pytest
import torch

from relin.config.lia_mtr import BridgeConfig, BridgeNIAHConfig
from relin.config.train import TrainConfig
from relin.eval.bridge_niah import NIAHBatches, NIAHProbe, evaluate_grid
from relin.train.loop import train
from relin.train.objectives import ReadoutCrossEntropy


class KilledAt(ReadoutCrossEntropy):
    """The readout loss, raising KeyboardInterrupt (a kill) on its ``calls``-th micro-batch."""

    def __init__(self, calls):
        self.remaining = calls

    def __call__(self, model, batch):
        self.remaining -= 1
        if self.remaining == 0:
            raise KeyboardInterrupt
        return super().__call__(model, batch)


def _cfg():
    return BridgeNIAHConfig(dim=16, num_values=4, noise_tokens=8, train_lengths=[8, 16], lengths=[16], depths=[0.5],
                            test_examples=8, train=TrainConfig(steps=9, batch_size=8, lr=3e-3, warmup_steps=2,
                                                               checkpoint_every=3, log_every=1))


def _probe(cfg, name):
    torch.manual_seed(0)
    return NIAHProbe(name, cfg, BridgeConfig())


@pytest.mark.parametrize("name", ["lia_mtr", "mha"])
def test_a_killed_probe_resumes_to_the_uninterrupted_result(tmp_path, name):
    cfg = _cfg()
    straight = train(_probe(cfg, name), ReadoutCrossEntropy(), NIAHBatches(cfg, 0), cfg.train,
                     checkpoint_root=tmp_path / "straight", progress=False)
    with pytest.raises(KeyboardInterrupt):
        train(_probe(cfg, name), KilledAt(calls=5), NIAHBatches(cfg, 0), cfg.train,
              checkpoint_root=tmp_path / "killed", progress=False)
    resumed = train(_probe(cfg, name), ReadoutCrossEntropy(), NIAHBatches(cfg, 0), cfg.train,
                    checkpoint_root=tmp_path / "killed", progress=False)
    assert resumed.resumed_from == 3
    for a, b in zip(resumed.model.state_dict().values(), straight.model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    assert [r["loss"] for r in resumed.history] == pytest.approx([r["loss"] for r in straight.history])
    assert {"step", "loss", "accuracy", "lr", "grad_norm"} <= set(resumed.history[0])
    assert evaluate_grid(resumed.model, cfg, 0)[1] == evaluate_grid(straight.model, cfg, 0)[1]


def test_the_probe_batches_follow_the_curriculum_and_repeat_per_step():
    from relin.config.train import CurriculumStage

    cfg = _cfg()
    cfg.train.curriculum = [CurriculumStage(until_step=4, max_len=8)]
    batches = NIAHBatches(cfg, 0)
    assert [batches.length(s) for s in (1, 4, 5, 6)] == [8, 8, 16, 8]
    (a,), (b,) = batches.micro_batches(5, 1), NIAHBatches(cfg, 0).micro_batches(5, 1)
    assert all(torch.equal(a[k], b[k]) for k in a)
