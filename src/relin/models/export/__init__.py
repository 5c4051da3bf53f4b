"""Exports of relin models to stock transformers architectures (loadable without relin)."""
from .qwen3_5 import export_problems, to_qwen3_5

__all__ = ["export_problems", "to_qwen3_5"]
