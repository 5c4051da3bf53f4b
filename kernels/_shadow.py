"""What ``kernels/__init__.py`` does when Python imports this folder as a top-level package (the repository
root on ``sys.path``): it puts the installed package of that name in its place, so ``import kernels`` and
``from kernels import ...`` reach Hugging Face's ``kernels`` as they would outside the checkout. With none
installed, an empty stand-in takes the name: transformers' availability probe (it finds this folder, then imports
it) reads it as absent, as it would read a missing package, and anything taken from it fails in one line."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import types


class Absent(types.ModuleType):
    """No ``__file__``, ``__path__`` or ``__version__`` (what transformers takes for a package that is not installed);
    any other name raises ImportError with ``reason``."""

    def __init__(self, name: str, reason: str):
        super().__init__(name, reason)
        self.reason = reason

    def __getattr__(self, attribute: str):
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        raise ImportError(self.reason, name=self.__name__)


def hand_over(name: str, init_file: str) -> None:
    """Replace ``sys.modules[name]`` (this folder, imported as ``name``) by the package ``name`` found on
    ``sys.path`` without the repository root, or by an :class:`Absent` stand-in when there is none."""
    sys.modules.pop(f"{name}._shadow", None)  # this helper, imported as part of the shadowing package
    root = os.path.dirname(os.path.dirname(os.path.abspath(init_file)))
    elsewhere = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != root]
    spec = importlib.machinery.PathFinder.find_spec(name, elsewhere)
    if spec is None or spec.loader is None:
        sys.modules[name] = Absent(name, f"{name}: relin's kernels import as relin.kernels, and no other {name!r} "
                                         f"package is installed")
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
