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


class _Recorder(torch.nn.Module):
    """A stand-in probe: records each slice of sequences it is given and answers 0."""

    def __init__(self, num_values):
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))
        self.num_values, self.seen = num_values, []

    def forward(self, pairs):
        self.seen.append(pairs.clone())
        return torch.zeros(pairs.shape[0], self.num_values)


@pytest.mark.parametrize("haystack", ["noise", "distractors"])
def test_every_depth_of_a_length_holds_the_same_sequences_with_the_needle_moved(haystack):
    """Depths compare paired: at a length, the k-th sequence of each depth is one haystack, needle and query, the
    needle at that depth's position; a profile length is scored at the first and last depth only."""
    from relin.eval import bridge_niah

    cfg = BridgeNIAHConfig(num_values=4, num_keys=3, haystack=haystack, lengths=[16, 40], depths=[0.0, 0.5, 1.0],
                           profile_lengths=[100], test_examples=bridge_niah.EVAL_BATCH + 5)
    model = _Recorder(cfg.num_values)
    rows, items = evaluate_grid(model, cfg, seed=3)
    assert [(r["length"], r["depth"]) for r in rows] == cfg.cells() == [
        (16, 0.0), (16, 0.5), (16, 1.0), (40, 0.0), (40, 0.5), (40, 1.0), (100, 0.0), (100, 1.0)]
    assert all(r["n"] == cfg.test_examples for r in rows) and len(items) == 8 * cfg.test_examples
    assert max(p.shape[0] for p in model.seen) == bridge_niah.EVAL_BATCH, "a cell runs in slices"
    sequences = [torch.cat(model.seen[i:i + 2]) for i in range(0, len(model.seen), 2)]
    for length, depths in ((16, (0.0, 0.5, 1.0)), (40, (0.0, 0.5, 1.0)), (100, (0.0, 1.0))):
        cells = {d: sequences[cfg.cells().index((length, d))] for d in depths}
        first = cells[depths[0]]
        where = {d: round(d * (length - 2)) for d in depths}
        for d, pairs in cells.items():
            assert pairs.shape == (cfg.test_examples, length, 2)
            # the needle at its position (its key; in the distractor haystack it keeps the value of the pair it
            # replaces), the query equal at every depth
            needle = first[:, where[depths[0]]]
            part = slice(None) if haystack == "noise" else slice(0, 1)
            assert torch.equal(pairs[:, where[d], part], needle[:, part]) and torch.equal(pairs[:, -1], first[:, -1])
            differ = (pairs != first).any(-1).any(0).nonzero().flatten().tolist()
            assert set(differ) <= {where[depths[0]], where[d]}, "only the needle moved"


def test_profile_lengths_lie_past_the_grid_and_need_two_depths():
    from relin.config.loader import ConfigError

    BridgeNIAHConfig(lengths=[16, 64], profile_lengths=[256]).validate("niah")
    with pytest.raises(ConfigError, match="profile_lengths"):
        BridgeNIAHConfig(lengths=[16, 64], profile_lengths=[64]).validate("niah")
    with pytest.raises(ConfigError, match="profile_lengths"):
        BridgeNIAHConfig(lengths=[16, 64], depths=[0.5], profile_lengths=[256]).validate("niah")
    assert BridgeNIAHConfig(lengths=[16], depths=[0.0, 0.5, 1.0]).cells() == [(16, 0.0), (16, 0.5), (16, 1.0)]
