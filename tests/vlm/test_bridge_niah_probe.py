"""The bridge-isolated NIAH: the key-value generator's answer is always the queried key's value, and the probe
trains through the one loop (a killed run resumes to the uninterrupted result)."""
import pytest
import torch

from relin.config.lia_mtr import BridgeConfig, BridgeNIAHConfig
from relin.config.train import TrainConfig
from relin.eval.bridge_niah import NIAHBatches, NIAHProbe, evaluate_grid, niah_batch
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
    return BridgeNIAHConfig(dim=16, num_values=4, num_keys=6, train_lengths=[8, 16], lengths=[16], depths=[0.5],
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


@pytest.mark.parametrize("depth", [None, 0.0, 0.4, 1.0])
def test_the_answer_is_the_queried_keys_value_and_no_distractor_shares_its_key(depth):
    import numpy as np

    cfg = BridgeNIAHConfig(num_values=5, num_keys=3, haystack="distractors")
    rng = np.random.default_rng(np.random.SeedSequence().entropy)
    for length in (2, 3, 17, 64):
        pairs, targets = niah_batch(rng, cfg, 200, length, depth)
        keys, values = pairs[..., 0].numpy(), pairs[..., 1].numpy()
        query = keys[:, -1]
        assert (values[:, -1] == cfg.num_values).all()                        # the query slot, not a value
        assert ((keys >= 0) & (keys < cfg.num_keys)).all() and ((values[:, :-1] < cfg.num_values)).all()
        holds = keys[:, :-1] == query[:, None]
        assert (holds.sum(1) == 1).all(), "the queried key appears in exactly one pair"
        needle = holds.argmax(1)
        assert (values[np.arange(200), needle] == targets.numpy()).all()
        if depth is not None:
            assert (needle == round(depth * (length - 2))).all()
        elif length > 3:
            assert len(set(needle.tolist())) > 1, "random depths put the needle at several positions"
    # the distractors draw from every other key: with 3 keys, each row of 40 holds both non-needle keys
    pairs, _ = niah_batch(rng, cfg, 50, 40, 0.5)
    for row in pairs[..., 0].tolist():
        assert set(row[:-1]) - {row[-1]} == set(range(3)) - {row[-1]}


@pytest.mark.parametrize("depth", [None, 0.0, 0.4, 1.0])
def test_in_the_noise_haystack_the_needle_is_the_one_pair_among_filler_words(depth):
    """RULER's noise haystack: every other position a filler word with the no-value slot, which a write gate can keep
    out of the state; the needle is the only key-value pair and the query names its key."""
    import numpy as np

    cfg = BridgeNIAHConfig(num_values=5, num_keys=3, num_filler=4)
    rng = np.random.default_rng(np.random.SeedSequence().entropy)
    for length in (2, 3, 17, 64):
        pairs, targets = niah_batch(rng, cfg, 200, length, depth)
        keys, values = pairs[..., 0].numpy(), pairs[..., 1].numpy()
        assert (values[:, -1] == cfg.num_values).all() and (keys[:, -1] < cfg.num_keys).all()
        is_pair = keys[:, :-1] < cfg.num_keys
        assert (is_pair.sum(1) == 1).all(), "one key-value pair: the needle"
        needle = is_pair.argmax(1)
        assert (keys[np.arange(200), needle] == keys[:, -1]).all()
        assert (values[np.arange(200), needle] == targets.numpy()).all() and (targets.numpy() < cfg.num_values).all()
        filler = ~is_pair
        assert ((keys[:, :-1][filler] >= cfg.num_keys) & (keys[:, :-1][filler] < cfg.num_keys + 4)).all()
        assert (values[:, :-1][filler] == cfg.num_values + 1).all(), "filler carries the no-value slot"
        if depth is not None:
            assert (needle == round(depth * (length - 2))).all()
