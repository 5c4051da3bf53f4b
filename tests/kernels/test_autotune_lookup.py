"""The autotuner's remembered choice (``common.triton_utils._cached_run``): a repeat launch with the same key
values and tensor dtypes skips Triton's lookup and launches the chosen config; anything else asks Triton."""
import torch
import triton

from relin.kernels.common.triton_utils import _cached_run


class FakeTuner:
    """The parts of triton's Autotuner that ``_cached_run`` uses; ``run`` plays Triton's lookup."""

    def __init__(self):
        self.keys = ["K", "V"]
        self.tuned, self.launched = [], []
        self.chosen = {}
        self.fn = self
        self.best_config = None

    def run(self, *args, **kwargs):
        if "num_warps" in kwargs:  # the JIT function's launch
            self.launched.append(kwargs["num_warps"])
            return "launched"
        self.tuned.append(kwargs.get("K"))
        self.best_config = triton.Config({}, num_warps=4 + 4 * len(self.tuned), num_stages=2)
        return "tuned"


def test_repeat_launches_reuse_the_choice_and_new_keys_or_dtypes_ask_triton():
    tuner = FakeTuner()
    x16, x32 = torch.zeros(2, dtype=torch.bfloat16), torch.zeros(2)
    assert _cached_run(tuner, x16, K=64, V=32, grid=(1,)) == "tuned"
    assert _cached_run(tuner, x16, K=64, V=32, grid=(1,)) == "launched"
    assert tuner.launched == [8]  # the first choice
    assert _cached_run(tuner, x32, K=64, V=32, grid=(1,)) == "tuned"  # another dtype
    assert _cached_run(tuner, x16, K=128, V=32, grid=(1,)) == "tuned"  # another key value
    assert _cached_run(tuner, x32, K=64, V=32, grid=(1,)) == "launched"
    assert tuner.launched == [8, 12]
    assert tuner.tuned == [64, 64, 128]


def test_a_key_passed_positionally_always_takes_tritons_path():
    tuner = FakeTuner()
    for _ in range(2):
        assert _cached_run(tuner, torch.zeros(1), V=32, grid=(1,)) == "tuned"
    assert tuner.launched == [] and tuner.chosen == {}
