"""A real-text corpus every install has: the Python source files of a pinned dependency's release.

The default is ``lm_eval`` 0.4.13 (EleutherAI's lm-evaluation-harness, pinned ``lm_eval==0.4.13`` in
pyproject.toml; MIT licence, Copyright (c) 2020 EleutherAI, which permits copying and deriving from it with the
notice kept). Its wheel is pure Python (``py3-none-any``) and pip writes a wheel's files byte for byte, so every
install holds the same 751 ``.py`` files (3.1 MB of code, comments and docstrings). The files are those the
distribution's ``RECORD`` lists, never a walk of the folder (which would pick up files a user added).

What may differ between machines (another release, an edited or sdist-built install) is caught by the digest:
sha256 over ``"<package>==<version>\\n"`` and, for every ``.py`` file in path order, ``"<path>\\0<size>\\0"`` and its
bytes. A mismatch with ``real_text.expected_digest`` is one line naming the package, its version and both digests.

The corpus is split by file and written as every corpus is (:mod:`relin.data.documents`).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..config.real_text import RealTextConfig
from ..errors import InputError
from ..packages import check_digest as refuse_other_digest
from ..packages import installed
from .documents import SPLITS, SourceFile, source_digest, source_record, split_documents, split_of

if TYPE_CHECKING:
    from datasets import DatasetDict

__all__ = ["SPLITS", "SourceFile", "build_real_text", "check_digest", "read_source", "split_of"]
SUFFIX = ".py"


def _installed_files(package: str, version: str) -> tuple[str, list[tuple[str, Path]]]:
    """``(installed version, [(path, location)])`` of the package's ``.py`` files as its ``RECORD`` lists them."""
    dist = installed(f"{package}=={version}", "real_text", f"pip install {package}=={version}")
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


def check_digest(cfg: RealTextConfig, found: str) -> None:
    """One line, naming the package, its version and both digests, unless ``found`` is the pinned one."""
    refuse_other_digest(f"real_text: {cfg.package} {cfg.version}: its .py files have digest", found,
                        cfg.expected_digest, f"not the release's bytes: reinstall it with pip install "
                        f"--force-reinstall {cfg.package}=={cfg.version}, or pin the new digest in "
                        f"real_text.expected_digest if the source was changed on purpose")


def build_real_text(cfg: RealTextConfig) -> tuple["DatasetDict", dict]:
    """``(DatasetDict, source)``: splits train / validation / test of whole files (``path``, ``text``, ``bytes``),
    and what ``source.json`` records (:func:`relin.data.documents.source_record`: the package with its version,
    licence and digest, files and bytes per split).

    Raises :class:`InputError` (one line) on another release, a digest mismatch, a file that is not UTF-8, or a
    split left without files (a ``max_bytes`` too small for the fractions)."""
    files = read_source(cfg)
    digest = source_digest(f"{cfg.package}=={cfg.version}", files)
    check_digest(cfg, digest)
    data, splits = split_documents(files, cfg.max_bytes, cfg.validation_fraction, cfg.test_fraction,
                                   f"real_text: {cfg.package} {cfg.version}",
                                   "a larger real_text.max_bytes or larger fractions")
    package = {"package": cfg.package, "version": cfg.version, "licence": _licence(cfg), "digest": digest,
               "files": len(files), "bytes": sum(len(f.data) for f in files)}
    return data, source_record([package], digest, files, splits)


def _licence(cfg: RealTextConfig) -> str:
    """The licence the installed distribution declares ("" when read from ``source_dir`` or undeclared)."""
    from importlib import metadata

    if cfg.source_dir:
        return ""
    meta = metadata.distribution(cfg.package).metadata
    declared = meta.get("License-Expression") or meta.get("License") or ""
    classifiers = [c.rsplit(" :: ", 1)[-1] for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    return (declared.strip().splitlines() or [""])[0] or ", ".join(classifiers)
