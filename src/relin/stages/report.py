"""``relin report``: the HTML/Markdown report (tables, figures) from stage outputs, grouped by model name.

Inputs are lists of files; each may be labelled ``NAME=PATH`` (see :mod:`relin.report.inputs` for the
default names). Nothing is recomputed: every number shown is read from a stage output.
"""
from __future__ import annotations

import argparse

from ..config.report import ReportConfig


def SECTIONS(args: argparse.Namespace) -> dict[str, type]:
    return {"report": ReportConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--eval", nargs="+", default=[], action="extend", metavar="[NAME=]METRICS_JSON",
                        help="metrics.json files of relin eval-lm")
    parser.add_argument("--history", "--teacher-history", nargs="+", default=[], action="extend", dest="history",
                        metavar="[NAME=]HISTORY_CSV",
                        help="training history.csv files (default name: <role>-<arch> from results/<role>/<arch>/)")
    parser.add_argument("--by-length", nargs="+", default=[], action="extend", metavar="[NAME=]CSV",
                        help="accuracy_by_length.csv files of relin eval-lm (default name: their directory)")
    parser.add_argument("--speed", help="speed.csv of relin hybrid-speed (OPAL's decode memory and throughput)")
    parser.add_argument("--hedgemamba-init", help="check.json of relin hedgemamba-init (the init's logit gap)")
    parser.add_argument("--lia-mtr", nargs="+", default=[], metavar="FILE", help="LIA-MTR stage outputs (mme, niah, "
                        "memory and probe files under results/lia_mtr/)")
    parser.add_argument("--lm-eval", nargs="*", default=[], metavar="JSON",
                        help="results JSONs of relin lm-eval (OPAL's lm-evaluation-harness benchmarks)")
    parser.add_argument("--out", required=True, help="report directory to write (index.html, summary.md, figures/)")


def run(args: argparse.Namespace, sections) -> None:
    import sys

    from .. import tracking
    from ..config.loader import as_dict
    from ..errors import InputError
    from ..report.build import build_report
    from ..report.inputs import read_by_length, read_eval, read_history, read_json, read_speed, unique_names

    cfg = sections.get("report")
    if not (args.eval or args.history or args.by_length):
        raise InputError("nothing to report (expected --eval, --history or --by-length files)")
    evals = [read_eval(spec) for spec in args.eval]
    histories = [read_history(spec) for spec in args.history]
    by_length = [read_by_length(spec) for spec in args.by_length]
    for items, what in ((evals, "evaluation"), (histories, "history"), (by_length, "accuracy-by-length")):
        unique_names(items, what)
    speed = read_speed(args.speed) if args.speed else None
    init = read_json(args.hedgemamba_init, "a check.json of relin hedgemamba-init") if args.hedgemamba_init else None
    inputs = [x.path for x in (*evals, *histories, *by_length, *([speed] if speed else []))]
    inputs += [args.hedgemamba_init] if args.hedgemamba_init else []
    inputs += args.lia_mtr + args.lm_eval
    with tracking.stage_run("report", {"report": as_dict(cfg)}, inputs=inputs, outputs=[args.out]) as tracker:
        out = build_report(cfg.title, evals, histories, by_length, args.out, speed, init,
                           lia_mtr=args.lia_mtr, lm_eval=args.lm_eval)
        tracker.log_artifact(out, "report")
    print(f"report: {out / 'index.html'} ({len(evals)} evaluations, {len(histories)} histories)", file=sys.stderr)
