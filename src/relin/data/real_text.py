"""A real-text corpus every install has: the Python source files of a pinned dependency's release.

The default is ``lm_eval`` 0.4.13 (EleutherAI's lm-evaluation-harness, pinned ``lm_eval==0.4.13`` in
pyproject.toml; MIT licence, Copyright (c) 2020 EleutherAI, which permits copying and deriving from it with the
notice kept). Its wheel is pure Python (``py3-none-any``) and pip writes a wheel's files byte for byte, so every
install holds the same 751 ``.py`` files (3.1 MB of code, comments and docstrings). The files are those the
distribution's ``RECORD`` lists, never a walk of the folder (which would pick up files a user added).

What may differ between machines (another release, an edited or sdist-built install) is caught by the digest:
sha256 over ``"<package>==<version>\\n"`` and, for every ``.py`` file in path order, ``"<path>\\0<size>\\0"`` and its
bytes. A mismatch with ``real_text.expected_digest`` is one line naming the package, its version and both digests.

The corpus itself is a ``DatasetDict`` of whole files (columns ``path``, ``text``, ``bytes``; one row per file,
sorted by path) in splits train / validation / test. A file's split is fixed by a hash of its path; ``max_bytes``
takes files in another fixed order (a differently salted hash of the path) until their bytes reach the cap, so the
sample spreads over the whole package and a smaller cap gives a subset of a larger one's files, in the same splits.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.real_text import RealTextConfig
from ..errors import InputError

if TYPE_CHECKING:
    from datasets import DatasetDict

SPLITS = ("train", "validation", "test")
SUFFIX = ".py"


@dataclass(frozen=True)
class SourceFile:
    """One file of the corpus: its path relative to site-packages (POSIX) and its bytes."""

    path: str
    data: bytes


def _unit(salt: str, path: str) -> float:
    """A number in [0, 1) fixed by ``path`` alone (the same on every machine, unlike ``hash``)."""
    return int.from_bytes(hashlib.sha256(f"{salt}\0{path}".encode()).digest()[:8], "big") / 2.0 ** 64


def split_of(path: str, validation_fraction: float, test_fraction: float) -> str:
    """The split of the file at ``path``: test, validation or train by a hash of the path."""
    u = _unit("split", path)
    return "test" if u < test_fraction else "validation" if u < test_fraction + validation_fraction else "train"


def _installed_files(package: str, version: str) -> tuple[str, list[tuple[str, Path]]]:
    """``(installed version, [(path, location)])`` of the package's ``.py`` files as its ``RECORD`` lists them."""
    from importlib import metadata

    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        raise InputError(f"real_text: package {package} is not installed (expected {package}=={version}, a pinned "
                         f"dependency: pip install {package}=={version})") from None
    if dist.version != version:
        raise InputError(f"real_text: {package} {dist.version} is installed, expected {version} (the corpus is that "
                         f"release's files: pip install {package}=={version})")
    if dist.files is None:
        raise InputError(f"real_text: {package} {version} has no RECORD of its files (installed by a tool that "
                         f"does not write one; expected a pip install of its wheel)")
    # Paths outside site-packages (``../../bin/...``, scripts) are the installer's, not the release's text.
    return dist.version, [(f.as_posix(), Path(f.locate())) for f in dist.files
                          if f.suffix == SUFFIX and not f.as_posix().startswith("..")]


def _directory_files(root: Path) -> list[tuple[str, Path]]:
    if not root.is_dir():
        raise InputError(f"real_text.source_dir {root}: no such directory")
    return [(p.relative_to(root).as_posix(), p) for p in root.rglob(f"*{SUFFIX}")
            if p.is_file() and "__pycache__" not in p.parts]


def read_source(cfg: RealTextConfig) -> list[SourceFile]:
    """Every ``.py`` file of the configured release (or of ``cfg.source_dir``), sorted by path."""
    listed = (_directory_files(Path(cfg.source_dir)) if cfg.source_dir
              else _installed_files(cfg.package, cfg.version)[1])
    if not listed:
        where = cfg.source_dir or f"{cfg.package} {cfg.version}"
        raise InputError(f"real_text: {where} has no {SUFFIX} files (expected a package's Python sources)")
    files = []
    for path, location in sorted(listed):
        try:
            files.append(SourceFile(path, location.read_bytes()))
        except OSError as err:
            raise InputError(f"real_text: {cfg.package} {cfg.version}: {path} unreadable ({err.strerror}); "
                             f"reinstall it: pip install --force-reinstall {cfg.package}=={cfg.version}") from None
    return files


def source_digest(package: str, version: str, files: list[SourceFile]) -> str:
    """``sha256:<hex>`` over the package name and version, then each file's path, size and bytes in order."""
    digest = hashlib.sha256(f"{package}=={version}\n".encode())
    for f in files:
        digest.update(f"{f.path}\0{len(f.data)}\0".encode())
        digest.update(f.data)
    return "sha256:" + digest.hexdigest()


def check_digest(cfg: RealTextConfig, found: str) -> None:
    """One line, naming the package, its version and both digests, unless ``found`` is the pinned one."""
    if cfg.expected_digest and found != cfg.expected_digest:
        raise InputError(f"real_text: {cfg.package} {cfg.version}: its .py files have digest {found}, expected "
                         f"{cfg.expected_digest} (not the release's bytes: reinstall it with pip install "
                         f"--force-reinstall {cfg.package}=={cfg.version}, or pin the new digest in "
                         f"real_text.expected_digest if the source was changed on purpose)")


def select(files: list[SourceFile], max_bytes: int) -> list[SourceFile]:
    """The files taken (in path-hash order) until their bytes reach ``max_bytes`` (0: all), sorted by path."""
    if not max_bytes:
        return files
    chosen, total = [], 0
    for f in sorted(files, key=lambda f: _unit("order", f.path)):
        if total >= max_bytes:
            break
        chosen.append(f)
        total += len(f.data)
    return sorted(chosen, key=lambda f: f.path)


def build_real_text(cfg: RealTextConfig) -> tuple["DatasetDict", dict]:
    """``(DatasetDict, source)``: splits train / validation / test of whole files (``path``, ``text``, ``bytes``),
    and what ``source.json`` records (package, version, licence, digest, files and bytes per split).

    Raises :class:`InputError` (one line) on another release, a digest mismatch, a file that is not UTF-8, or a
    split left without files (a ``max_bytes`` too small for the fractions)."""
    from datasets import Dataset, DatasetDict, Features, Value

    files = read_source(cfg)
    digest = source_digest(cfg.package, cfg.version, files)
    check_digest(cfg, digest)
    by_split: dict[str, dict[str, list]] = {s: {"path": [], "text": [], "bytes": []} for s in SPLITS}
    for f in select(files, cfg.max_bytes):
        try:
            text = f.data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"real_text: {cfg.package} {cfg.version}: {f.path} is not UTF-8 (byte {err.start})") \
                from None
        columns = by_split[split_of(f.path, cfg.validation_fraction, cfg.test_fraction)]
        columns["path"].append(f.path)
        columns["text"].append(text)
        columns["bytes"].append(len(f.data))
    empty = [s for s in SPLITS if not by_split[s]["path"] and (s != "validation" or cfg.validation_fraction)]
    if empty:
        raise InputError(f"real_text: no files in the {', '.join(empty)} split(s) of {cfg.package} {cfg.version} "
                         f"(max_bytes={cfg.max_bytes}; expected a larger real_text.max_bytes or larger fractions)")
    features = Features({"path": Value("string"), "text": Value("string"), "bytes": Value("int64")})
    data = DatasetDict({s: Dataset.from_dict(by_split[s], features=features) for s in SPLITS})
    source = {"package": cfg.package, "version": cfg.version, "licence": _licence(cfg), "digest": digest,
              "source_files": len(files), "source_bytes": sum(len(f.data) for f in files),
              "splits": {s: {"files": len(by_split[s]["path"]), "bytes": sum(by_split[s]["bytes"])} for s in SPLITS}}
    return data, source


def _licence(cfg: RealTextConfig) -> str:
    """The licence the installed distribution declares ("" when read from ``source_dir`` or undeclared)."""
    from importlib import metadata

    if cfg.source_dir:
        return ""
    meta = metadata.distribution(cfg.package).metadata
    declared = meta.get("License-Expression") or meta.get("License") or ""
    classifiers = [c.rsplit(" :: ", 1)[-1] for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    return (declared.strip().splitlines() or [""])[0] or ", ".join(classifiers)
