"""``relin report``: the HTML/Markdown report (verdicts, tables, figures) from stage outputs, grouped by model name.

Inputs are lists of files; each may be labelled ``NAME=PATH`` (see :mod:`relin.report.inputs` for the
default names). Nothing is trained or evaluated again: every number shown is read from a stage output, and
every interval is a bootstrap over the evaluated items those outputs list.
"""
from __future__ import annotations

import argparse

from ..config.opal import OnPolicyConfig, SWAConfig
from ..config.report import ReportConfig


def SECTIONS(args: argparse.Namespace) -> dict[str, type]:
    return {"report": ReportConfig, "opal.teacher": str, "opal.swa": SWAConfig, "opal.niah_protocol": str,
            "opal.onpolicy": OnPolicyConfig, "hedgemamba.teacher": str}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--eval", nargs="+", default=[], action="extend", metavar="[NAME=]METRICS_JSON",
                        help="metrics.json files of relin eval-lm")
    parser.add_argument("--items", nargs="+", default=[], action="extend", metavar="[NAME=]ITEMS_CSV",
                        help="items.csv files of relin eval-lm (default name: their directory), for the intervals")
    parser.add_argument("--history", nargs="+", default=[], action="extend", metavar="[NAME=]HISTORY_CSV",
                        help="training history.csv files (default name: <role>-<arch> from results/<role>/<arch>/)")
    parser.add_argument("--train-metrics", nargs="+", default=[], action="extend", metavar="[NAME=]JSON",
                        help="train_metrics.json files of training stages (their budgets; named as histories)")
    parser.add_argument("--by-length", nargs="+", default=[], action="extend", metavar="[NAME=]CSV",
                        help="accuracy_by_length.csv files of relin eval-lm (default name: their directory)")
    parser.add_argument("--speed", help="speed.csv of relin hybrid-speed (OPAL's decode memory and throughput)")
    parser.add_argument("--hedgemamba-init", help="check.json of relin hedgemamba-init (the init's logit gap)")
    parser.add_argument("--opal-layers", help="layers.json of relin opal-convert --mixer gdn (the kept layers)")
    parser.add_argument("--hedgemamba-decays", nargs="+", default=[], metavar="[NAME=]JSON",
                        help="decays.json files of relin hedgemamba-finetune (Λ before and after stage 2)")
    parser.add_argument("--lia-mtr", nargs="+", default=[], metavar="PATH", help="LIA-MTR stage outputs (mme, niah, "
                        "memory and probe files and answer folders under results/lia_mtr/)")
    parser.add_argument("--lm-eval", nargs="*", default=[], metavar="JSON",
                        help="results JSONs of relin lm-eval (OPAL's lm-evaluation-harness benchmarks)")
    parser.add_argument("--configs", nargs="+", default=["params.yaml"], metavar="NAME",
                        help="the config layers the run used (params.yaml, overlays, --config), named at the "
                             "report's head")
    parser.add_argument("--out", required=True, help="report directory to write (index.html, summary.md, figures/)")


def commit() -> tuple[str, str]:
    """The checkout's short commit (``+`` when files differ from it) and its date; ``unknown`` outside git."""
    import subprocess

    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], capture_output=True, text=True, check=True).stdout.strip()

    try:
        head, date = git("rev-parse", "--short", "HEAD"), git("show", "-s", "--format=%cs", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError):
        return "unknown", "no git checkout"
    return head + ("+" if dirty else ""), date


def run(args: argparse.Namespace, sections) -> None:
    import sys

    from .. import tracking
    from ..config.loader import as_dict
    from ..errors import InputError
    from ..report.build import Provenance, ReportInputs, ReportSettings, build_report
    from ..report.hedgemamba import HedgeMambaSettings
    from ..report.inputs import (
        read_by_length,
        read_eval,
        read_history,
        read_speed,
        read_train_metrics,
        unique_names,
    )
    from ..report.lia_mtr import LiaSettings
    from ..report.lm_scores import read_items
    from ..report.margins import margins_from
    from ..report.opal import OpalSettings

    cfg = sections.get("report")
    if not (args.eval or args.history or args.by_length):
        raise InputError("nothing to report (expected --eval, --history or --by-length files)")
    inputs = ReportInputs(
        evals=[read_eval(spec) for spec in args.eval], items=[read_items(spec) for spec in args.items],
        histories=[read_history(spec) for spec in args.history],
        by_length=[read_by_length(spec) for spec in args.by_length],
        train_metrics=[read_train_metrics(spec) for spec in args.train_metrics],
        speed=read_speed(args.speed) if args.speed else None,
        hedgemamba_init=(read_train_metrics(args.hedgemamba_init, "a check.json of relin hedgemamba-init")
                         if args.hedgemamba_init else None),
        hedgemamba_decays=[read_train_metrics(spec, "a decays.json of relin hedgemamba-finetune")
                           for spec in args.hedgemamba_decays],
        opal_layers=(read_train_metrics(args.opal_layers, "a layers.json of relin opal-convert")
                     if args.opal_layers else None),
        lia_mtr=list(args.lia_mtr), lm_eval=list(args.lm_eval))
    for items, what in ((inputs.evals, "evaluation"), (inputs.items, "items"), (inputs.histories, "history"),
                        (inputs.by_length, "accuracy-by-length"), (inputs.train_metrics, "train-metrics")):
        unique_names(items, what)
    rules = {"margins": margins_from(cfg.margins), "pre": cfg.preconditions}
    prompts = sections.get("opal.onpolicy").prompt_tasks
    settings = ReportSettings(
        title=cfg.title, mastery=cfg.mastery, resamples=cfg.resamples, min_steps=cfg.min_steps,
        opal=OpalSettings(teacher=f"teacher-{sections.get('opal.teacher')}",
                          swa_window=sections.get("opal.swa").window,
                          niah_protocol=sections.get("opal.niah_protocol"), mastery=cfg.mastery,
                          prompt_tasks=tuple(task for task, weight in prompts.items() if weight > 0), **rules),
        hedgemamba=HedgeMambaSettings(teacher=f"teacher-{sections.get('hedgemamba.teacher')}", mastery=cfg.mastery,
                                      **rules),
        lia_mtr=LiaSettings(cfg.mastery, cfg.resamples, **rules))
    head, date = commit()
    with tracking.stage_run("report", {"report": as_dict(cfg)}, inputs=inputs.paths(), outputs=[args.out]) as tracker:
        out = build_report(inputs, settings, Provenance(tuple(args.configs), head, date), args.out)
        tracker.log_artifact(out, "report")
    print(f"report: {out / 'index.html'} ({len(inputs.evals)} evaluations, {len(inputs.histories)} histories)",
          file=sys.stderr)
