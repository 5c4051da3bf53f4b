"""What a stage writes to its log: its own lines, not the libraries' chatter.

Every stage runs with :func:`quiet_libraries` (called by the CLI): transformers, datasets and the hub keep
their warnings and errors but drop progress bars and load reports, DeepSpeed is told the accelerator on a
machine without a GPU instead of warning that it guessed, MLflow logs at warning level. :func:`progress` is
a tqdm bar on a terminal and nothing in a log file (a bar there is a ``\\r`` stream); long loops print a plain
line per logged step instead (the training loop does).
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Any


def to_terminal() -> bool:
    return sys.stderr.isatty()


def quiet_libraries() -> None:
    """Set through the environment, before the libraries load (no import here: a stage pays only for what it
    uses). DeepSpeed's accelerator is named only on a machine without a GPU it could have found."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' bars follow the hub's
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # mlflow sets its loggers' level when imported
    if "DS_ACCELERATOR" not in os.environ and not os.path.exists("/dev/nvidia0"):
        os.environ["DS_ACCELERATOR"] = "cpu"
    for name in ("deepspeed", "DeepSpeed"):
        logging.getLogger(name).setLevel(logging.WARNING)


def progress(iterable: Any = None, **kwargs: Any):
    """``tqdm`` on stderr when it is a terminal; a pass-through in a log file."""
    from tqdm import tqdm

    disable = kwargs.pop("disable", False) or not to_terminal()
    return tqdm(iterable, file=sys.stderr, disable=disable, **kwargs)
