"""``relin report``: the HTML/Markdown report (verdicts, tables, figures) from stage outputs, grouped by model name.

Its inputs are the papers' report manifests (:mod:`relin.manifest`), which name every file's model.
Nothing is trained or evaluated again: every number shown is read from a stage output, and every interval is a
bootstrap over the evaluated items those outputs list.
"""
from __future__ import annotations

import argparse

from ..config.data import NIAHConfig
from ..config.opal import NIAH_TASKS, OnPolicyConfig, SWAConfig
from ..config.report import ReportConfig
from ..config.train import TrainConfig


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"report": ReportConfig, "opal.teacher": str, "opal.swa": SWAConfig, "opal.niah_protocol": str,
            "opal.onpolicy": OnPolicyConfig, "hedgemamba.teacher": str, "teacher.train": TrainConfig,
            "data.niah": NIAHConfig}


def teacher_trained(niah: NIAHConfig, teacher_train: TrainConfig) -> tuple[str, ...]:
    """The NIAH families whose rows the teachers draw: a synthetic family with train rows and a positive weight in
    the teachers' mix (an unlisted task weighs 1; ``niah_text`` has test rows only)."""
    return tuple(task for task in NIAH_TASKS if task != "niah_text" and niah.train_examples > 0
                 and teacher_train.task_weights.get(task, 1.0) > 0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--manifest", nargs="+", required=True, metavar="JSON",
                        help="report manifests of relin report-manifest, one per paper shown")
    parser.add_argument("--configs", nargs="+", default=["params.yaml"], metavar="NAME",
                        help="the config layers the run used (params.yaml, overlays, --config), named at the "
                             "report's head")
    parser.add_argument("--out", required=True, help="report directory to write (index.html, summary.md, figures/)")


# The files whose content decides verdicts: the claims, preconditions and intervals, the thresholds' config and the
# config that sets them (params.yaml's report section).
# What decides verdicts: the report's code, its config, params.yaml, and the config modules that hold claim rows
# (relin.config.claims; a paper's CLAIMS sit beside its CHAIN, so a model row's edit counts too: a warning too many
# rather than a rule changed unseen).
RULES = ("src/relin/report", "src/relin/config/report.py", "src/relin/config/claims.py", "src/relin/config/opal.py",
         "src/relin/config/hedgemamba.py", "src/relin/config/lia_mtr.py", "params.yaml")


def _git(*argv: str) -> str:
    import subprocess

    return subprocess.run(["git", *argv], capture_output=True, text=True, check=True).stdout.strip()


def commit() -> tuple[str, str]:
    """The checkout's short commit (``+`` when files differ from it) and its date; ``unknown`` outside git."""
    import subprocess

    try:
        head, date = _git("rev-parse", "--short", "HEAD"), _git("show", "-s", "--format=%cs", "HEAD")
        dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError):
        return "unknown", "no git checkout"
    return head + ("+" if dirty else ""), date


def rules_commit() -> tuple[str, str]:
    """The last commit that changed the verdict rules (:data:`RULES`; ``+`` when they differ from it now) and its
    time (ISO 8601); ``unknown`` outside git."""
    import subprocess

    try:
        found = _git("log", "-1", "--format=%h %cI", "--", *RULES)
        dirty = bool(_git("status", "--porcelain", "--untracked-files=no", "--", *RULES))
    except (OSError, subprocess.CalledProcessError):
        return "unknown", ""
    if not found:
        return "unknown", ""
    head, time = found.split()
    return head + ("+" if dirty else ""), time


def run(args: argparse.Namespace, sections) -> None:
    import sys

    from .. import tracking
    from ..config.loader import as_dict
    from ..names import teacher_eval
    from ..report.build import Provenance, ReportSettings, build_report
    from ..report.hedgemamba import HedgeMambaSettings
    from ..report.lia_mtr import LiaSettings
    from ..report.margins import margins_from
    from ..report.opal import OpalSettings
    from ..report.read import read_manifests

    cfg = sections.get("report")
    inputs = read_manifests(args.manifest)
    rules = {"margins": margins_from(cfg.margins), "pre": cfg.preconditions}
    prompts = sections.get("opal.onpolicy").prompt_tasks
    settings = ReportSettings(
        title=cfg.title, mastery=cfg.mastery, resamples=cfg.resamples, min_steps=cfg.min_steps,
        opal=OpalSettings(teacher=teacher_eval(sections.get("opal.teacher")),
                          swa_window=sections.get("opal.swa").window, swa_layout=sections.get("opal.swa").layout,
                          niah_protocol=sections.get("opal.niah_protocol"), mastery=cfg.mastery,
                          prompt_tasks=tuple(task for task, weight in prompts.items() if weight > 0),
                          teacher_trained=teacher_trained(sections.get("data.niah"), sections.get("teacher.train")),
                          **rules),
        hedgemamba=HedgeMambaSettings(teacher=teacher_eval(sections.get("hedgemamba.teacher")), mastery=cfg.mastery,
                                      **rules),
        lia_mtr=LiaSettings(cfg.mastery, cfg.resamples, **rules))
    head, date = commit()
    rules, rules_time = rules_commit()
    # its inputs are the manifests (each a run whose inputs are the files it lists): the lineage reads
    # evaluation -> manifest -> report, as the DAG does
    with tracking.stage_run("report", {"report": as_dict(cfg)}, inputs=args.manifest, outputs=[args.out]) as tracker:
        out = build_report(inputs, settings, Provenance(tuple(args.configs), head, date, rules, rules_time), args.out)
        tracker.log_artifact(out, "report")
    print(f"report: {out / 'index.html'} ({len(inputs.evals)} evaluations, {len(inputs.histories)} histories)",
          file=sys.stderr)
