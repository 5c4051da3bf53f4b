"""Loading any causal LM a relin stage saved, the GDN / SWA / HedgeMamba hybrid included.

Kept apart from :func:`relin.models.teachers.load_pretrained` so that only the stages that can meet a hybrid depend
on its layers and kernels (their DVC code dependencies and checkpoint keys follow the imports).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def load_saved(reference: str) -> "PreTrainedModel":
    """:func:`~relin.models.teachers.load_pretrained` with the hybrid registered with transformers' Auto classes."""
    from . import hybrid  # noqa: F401  (registers the hybrid with AutoConfig and AutoModelForCausalLM)
    from .teachers import load_pretrained

    return load_pretrained(reference)
