"""``import relin`` registers relin's Hugging Face model classes (the hybrid causal LM) with transformers' Auto
classes, so that ``AutoModelForCausalLM.from_pretrained`` loads any saved relin model.

Registering means importing torch and transformers' modelling code (seconds), which the CLI, the Snakefile and the
config tools never need. So the classes register at once when transformers is already imported, and otherwise right
after transformers' own first import: nothing is imported that the caller would not import anyway.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys


def register() -> None:
    from .models import hybrid  # noqa: F401  (registers with AutoConfig and AutoModelForCausalLM on import)


class _RegisterAfterTransformers(importlib.abc.MetaPathFinder):
    """Finds nothing itself: on the first import of ``transformers`` it lets the usual finders locate it and runs
    :func:`register` once its ``__init__`` has executed."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "transformers":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            loader, execute = spec.loader, spec.loader.exec_module

            def exec_module(module):
                execute(module)
                register()

            loader.exec_module = exec_module
        return spec


def register_on_import() -> None:
    if "transformers" in sys.modules:
        register()
    elif not any(isinstance(finder, _RegisterAfterTransformers) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterTransformers())


def cancel_pending() -> None:
    """Drop a registration still waiting for transformers. The ``relin`` CLI does: its stages import the model
    modules they load with, and a stage that needs only a tokenizer would otherwise pay torch and the modelling
    code (2-3 s per process)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _RegisterAfterTransformers)]
