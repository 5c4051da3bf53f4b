"""``relin real-text --out DIR``: the ``real_text`` section's corpus, the Python files of a pinned release.

Writes ``DIR/`` (``save_to_disk``: splits train, validation, test of whole files; columns ``path``, ``text``,
``bytes``) and ``DIR/source.json`` (package, version, licence, digest, files and bytes per split), atomically.
The files are read and their digest checked before anything is opened or written: another release or altered
files end with one line naming the package, its version and both digests (:mod:`relin.data.real_text`).
"""
from __future__ import annotations

import argparse

from ..config.real_text import RealTextConfig


def SECTIONS(args: argparse.Namespace) -> dict[str, type]:
    return {"real_text": RealTextConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="output directory (e.g. results/data/real_text)")


def run(args: argparse.Namespace, sections) -> None:
    import time

    from datasets.utils.logging import disable_progress_bar

    from ..config.loader import as_dict
    from ..data.real_text import build_real_text
    from ..io import atomic_dir, atomic_write_json
    from ..tracking import stage_run

    cfg = sections.get("real_text")
    disable_progress_bar()
    start = time.perf_counter()
    data, source = build_real_text(cfg)  # a digest mismatch stops here: no run, no output
    seconds = time.perf_counter() - start
    with stage_run("real-text", {"real_text": as_dict(cfg)}, outputs=[args.out]) as tracker:
        tracker.record({"digest": source["digest"], "build_s": round(seconds, 2)})
        with atomic_dir(args.out) as tmp:
            data.save_to_disk(str(tmp))
            atomic_write_json(tmp / "source.json", source)
        tracker.log_metrics({f"{split}_{k}": v for split, entry in source["splits"].items() for k, v in entry.items()})
    splits = ", ".join(f"{s} {e['files']} files ({e['bytes']} bytes)" for s, e in source["splits"].items())
    print(f"real-text: {source['package']} {source['version']} ({source['digest']}): {splits} -> {args.out}")
