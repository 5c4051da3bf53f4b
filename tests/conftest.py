"""Test-wide setup: the Triton interpreter on machines without a GPU, offline libraries."""
import os

import torch

if not torch.cuda.is_available():
    # Must be set before triton is first imported: the kernel tests run through the interpreter.
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
