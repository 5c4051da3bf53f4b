"""The relin source a module runs: the module, every relin module it imports (transitively, at the
top level or inside functions, but not under ``if TYPE_CHECKING:``) and the ``__init__.py`` of
their packages.

Two consumers share this one walk: ``workflow/scripts/gen_dvc.py`` lists these files as a DVC
stage's code dependencies, and a training stage keys its checkpoints on their digest
(:func:`code_digest`), so a code change both reruns the stage and restarts its training from step 0.
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SourceTree:
    """Where the ``relin`` package (``src/relin``, its kernels in ``src/relin/kernels``) lives."""

    package: Path

    @classmethod
    def installed(cls) -> "SourceTree":
        return cls(Path(__file__).resolve().parents[1])

    @classmethod
    def checkout(cls, root: Path) -> "SourceTree":
        return cls(root / "src" / "relin")

    def module_file(self, module: str) -> Path | None:
        parts = module.split(".")
        if parts[0] != "relin":
            return None
        rest = parts[1:]
        candidates = [self.package.joinpath(*rest).with_suffix(".py")] if rest else []
        candidates.append(self.package.joinpath(*rest) / "__init__.py")
        return next((c for c in candidates if c.is_file()), None)

    def module_name(self, path: Path) -> str:
        parts = ["relin", *path.relative_to(self.package).with_suffix("").parts]
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, tree: SourceTree) -> frozenset[str]:
    """relin modules imported anywhere in ``path``, with the packages that contain them (parsed once per
    version of the file: ``gen_dvc.py`` walks the same modules for every stage)."""
    stat = path.stat()
    key = (path, tree, stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        _PARSED[key] = frozenset(_parse_imports(path, tree))
    return _PARSED[key]


_PARSED: dict[tuple, frozenset[str]] = {}


def _parse_imports(path: Path, tree: SourceTree) -> set[str]:
    name = tree.module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {m for m in found if m.startswith("relin")}


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` (never run)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def _packages(module: str) -> list[str]:
    """The packages Python imports before ``module``: ``relin.train.loop`` -> relin, relin.train."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


# Modules whose imports are not followed: ``relin._auto`` imports the hybrid model only once transformers is
# imported, to register it with the Auto classes, and every stage that loads a saved model imports the hybrid itself
# (``models.teachers.load_pretrained``); following it would make every stage, synthetic data included, depend on
# every layer and kernel.
NOT_FOLLOWED = frozenset({"relin._auto"})


def code_files(module: str, tree: SourceTree | None = None) -> list[Path]:
    """Every relin source file ``module`` runs, sorted; other stage modules are not followed (the
    shared ``_*.py`` helpers under ``stages/`` are), nor the imports of :data:`NOT_FOLLOWED`."""
    tree = tree or SourceTree.installed()
    start = tree.module_file(module)
    if start is None:
        raise ValueError(f"{module}: no such relin module under {tree.package}")
    stages = tree.package / "stages"
    seen, todo = {start}, [start]
    while todo:
        path = todo.pop()
        name = tree.module_name(path)
        for imported in (set() if name in NOT_FOLLOWED else _imports(path, tree)) | set(_packages(name)):
            path = tree.module_file(imported)
            if path is None or path in seen or (stages in path.parents and not path.name.startswith("_")):
                continue
            seen.add(path)
            todo.append(path)
    return sorted(seen)


def code_digest(module: str, tree: SourceTree | None = None) -> str:
    """sha256 of the names and contents of :func:`code_files` of ``module``."""
    tree = tree or SourceTree.installed()
    h = hashlib.sha256()
    for path in code_files(module, tree):
        h.update(tree.module_name(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()
