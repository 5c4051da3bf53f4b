"""Where a training run's logged steps are shown besides its history: the stage's tracker, a progress bar on a
terminal, and a line per logged step in a log file (where a bar would be a ``\\r`` stream)."""
from __future__ import annotations

import sys

from ..logs import progress as progress_bar
from ..logs import to_terminal
from ..tracking import NullTracker


class Progress:
    """The progress of steps ``initial + 1 .. total``; ``show`` is false off rank 0 and when the caller asks for
    quiet (the tracker still gets every logged step)."""

    def __init__(self, tracker: NullTracker, total: int, initial: int, show: bool):
        self.tracker, self.total = tracker, total
        self.bar = progress_bar(total=total, initial=initial, disable=not show, desc="train", dynamic_ncols=True,
                                mininterval=1.0)
        self.lines = show and not to_terminal()

    def advance(self) -> None:
        self.bar.update(1)

    def log(self, row: dict[str, float]) -> None:
        """A logged step's history row (``step``, ``loss``, ``lr``, ``tokens_per_s`` and the rest)."""
        step = row["step"]
        self.tracker.log_metrics({k: v for k, v in row.items() if k != "step"}, step)
        self.bar.set_postfix(loss=f"{row['loss']:.4f}", refresh=False)
        if self.lines:
            print(f"step {step}/{self.total}  loss {row['loss']:.4f}  lr {row['lr']:.2e}  "
                  f"{row['tokens_per_s']:.0f} tokens/s", file=sys.stderr, flush=True)

    def close(self) -> None:
        self.bar.close()
