"""What ``kernels/__init__.py`` does when Python imports this folder as a top-level package (the repository
root on ``sys.path``): it puts the installed package of that name in its place, so ``import kernels`` and
``from kernels import ...`` reach Hugging Face's ``kernels`` as they would outside the checkout."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def hand_over(name: str, init_file: str) -> None:
    """Replace ``sys.modules[name]`` (this folder, imported as ``name``) by the package ``name`` found on
    ``sys.path`` without the repository root; raise ImportError when there is none."""
    sys.modules.pop(f"{name}._shadow", None)  # this helper, imported as part of the shadowing package
    root = os.path.dirname(os.path.dirname(os.path.abspath(init_file)))
    elsewhere = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != root]
    spec = importlib.machinery.PathFinder.find_spec(name, elsewhere)
    if spec is None or spec.loader is None:
        sys.modules.pop(name, None)
        raise ImportError(f"{name}: relin's kernels import as relin.kernels, and no other {name!r} package is "
                          f"installed", name=name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
