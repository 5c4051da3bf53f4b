"""``relin report-manifest``: the list of stage outputs one paper's report section reads, with their digests.

Listed from the paper's table (:mod:`relin.manifest`); the report rule reads these manifests only.
"""
from __future__ import annotations

import argparse

from ..config.papers import PAPERS
from ..manifest import SECTIONS as MANIFEST_SECTIONS


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return MANIFEST_SECTIONS[args.paper]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--paper", required=True, choices=PAPERS, help="the paper whose section the manifest lists")
    parser.add_argument("--out", required=True, help="the manifest JSON to write")


def run(args: argparse.Namespace, sections) -> None:
    import json
    import sys

    from .. import tracking
    from ..config.loader import as_dict
    from ..io import atomic_write_text
    from ..manifest import manifest, paths

    listed = manifest(args.paper, sections.get)
    params = {name: as_dict(sections.get(name)) for name in config_sections(args)}
    # a child run like every stage's: the lineage runs from each evaluation through its manifest to the report
    with tracking.stage_run("report-manifest", params, inputs=paths(listed["files"]), outputs=[args.out],
                            label=args.paper):
        atomic_write_text(args.out, json.dumps(listed, indent=1, sort_keys=True) + "\n")
    print(f"report manifest of {args.paper}: {len(paths(listed['files']))} files -> {args.out}", file=sys.stderr)
