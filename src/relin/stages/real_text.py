"""``relin real-text --out DIR``: the ``real_text`` section's corpus, the Python files of a pinned release.

Writes ``DIR/`` (``save_to_disk``: splits train, validation, test of whole files; columns ``path``, ``text``,
``bytes``) and ``DIR/source.json`` (the package with its version, licence and digest, files and bytes per split),
atomically. The files are read and their digest checked before anything is opened or written: another release or
altered files end with one line naming the package, its version and both digests (:mod:`relin.data.real_text`).
"""
from __future__ import annotations

import argparse
from typing import Any, Callable

from ..config.real_text import RealTextConfig


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"real_text": RealTextConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="output directory (e.g. results/data/real_text)")


def write_corpus(stage: str, section: str, cfg: Any, build: Callable[[Any], tuple[Any, dict]], out: str) -> None:
    """Build a corpus of documents (``build(cfg)``: its checks first, so a refusal leaves no run and no output),
    then write it and its ``source.json`` atomically inside the stage's MLflow run."""
    import time

    from datasets.utils.logging import disable_progress_bar

    from ..config.loader import as_dict
    from ..io import atomic_dir, atomic_write_json
    from ..tracking import stage_run

    disable_progress_bar()
    start = time.perf_counter()
    data, source = build(cfg)
    seconds = time.perf_counter() - start
    with stage_run(stage, {section: as_dict(cfg)}, outputs=[out]) as tracker:
        tracker.record({"digest": source["digest"], "build_s": round(seconds, 2)})
        tracker.set_tags({"relin.packages": ", ".join(f"{p['package']}=={p['version']}" for p in source["packages"]),
                          "relin.licence": source["licence"]})
        with atomic_dir(out) as tmp:
            data.save_to_disk(str(tmp))
            atomic_write_json(tmp / "source.json", source)
        tracker.log_metrics({f"{split}_{k}": v for split, entry in source["splits"].items() for k, v in entry.items()})
    packages = " + ".join(f"{p['package']} {p['version']}" for p in source["packages"])
    splits = ", ".join(f"{s} {e['files']} files ({e['bytes']} bytes)" for s, e in source["splits"].items())
    print(f"{stage}: {packages} ({source['digest']}): {splits} -> {out}")


def run(args: argparse.Namespace, sections) -> None:
    from ..data.real_text import build_real_text

    write_corpus("real-text", "real_text", sections.get("real_text"), build_real_text, args.out)
