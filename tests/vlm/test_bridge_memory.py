"""The CPU memory benchmark counts the allocator's bytes: the peak of what a forward holds at once, exact to the byte,
whatever the process's resident pages do."""
import torch

from relin.eval.bridge_memory import allocated_peak, measure_cpu


def test_the_peak_is_what_the_allocator_holds_at_once():
    def forward():
        a = torch.empty(1000, dtype=torch.float32)          # 4,000 bytes
        b = torch.empty(250_000, dtype=torch.float32)       # 1,000,000 bytes
        del b
        c = torch.empty(100_000, dtype=torch.float32)       # 400,000 bytes, after b is freed
        return a, c

    assert allocated_peak(forward) == 4_000 + 1_000_000


def test_eager_attention_grows_as_the_square_of_the_patches_and_the_scan_linearly():
    """Naive MHA forms [1, H, N, N] scores: doubling N quadruples its peak; LIA-MTR's scan doubles."""
    points = {(b, impl): [measure_cpu(b, impl, n, 16, 16, 2, 10**9)["peak_bytes"] for n in (256, 512)]
              for b, impl in (("mha", "naive"), ("lia_mtr", "-"))}
    naive, scan = (high / low for low, high in points.values())
    assert 3.6 < naive < 4.4 and 1.6 < scan < 2.4, points
    assert measure_cpu("mha", "naive", 512, 16, 16, 2, 10)["status"] == "skipped"
