"""``relin``: one command per DAG stage, plus workflow utilities.

    relin <stage> [--params params.yaml] [--overlay smoke.yaml] [--config JSON] <stage arguments>
    relin schema            write workflow/schemas/params.schema.yaml from the typed configs
    relin check-config      validate params.yaml (+ overlays) and print one line
    relin run-job RULE TARGET...   one Snakemake job under the pipeline lock (the command of each DVC stage)
    relin status            `dvc status` in one line per stage, then a count of up to date / changed / not run
    relin mme-score RESULTS_DIR    score MME answer files in the official layout (<subtask>.txt per subtask)
    relin publish-report --to docs/results/<config>   the committed copy of results/report (page, Markdown, figures)
    relin --version         the release and, in a checkout, its commit

A stage reads its config sections either from ``--config`` (JSON of exactly the sections it
declares: what its Snakemake rule passes) or from ``--params`` plus overlays. User mistakes end with
one line on stderr and a non-zero exit; nothing is written.
"""
from __future__ import annotations

import argparse
import sys

from .errors import reported


def _parser() -> argparse.ArgumentParser:
    """The parser of the workflow commands; the stages are listed (:mod:`relin.stages.command` parses each)."""
    from .stages import STAGES
    from .stages.command import OneLineParser, add_common_arguments

    parser = OneLineParser(prog="relin", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    schema = sub.add_parser("schema", help="write the params JSON schema (generated from the typed configs)")
    schema.add_argument("--out", default="workflow/schemas/params.schema.yaml")
    check = sub.add_parser("check-config", help="validate params.yaml and overlays")
    add_common_arguments(check)
    job = sub.add_parser("run-job", help="run one Snakemake job under the pipeline lock (DVC stages call this)")
    job.add_argument("rule", help="the Snakemake rule of the job")
    job.add_argument("targets", nargs="+", help="the job's output files")
    sub.add_parser("status", help="`dvc status` in one line per stage (up to date, what changed, what is missing)")
    publish = sub.add_parser("publish-report", help="copy a report (page, Markdown, figures) to its committed copy")
    publish.add_argument("--report", default="results/report", help="the report directory the report stage wrote")
    publish.add_argument("--to", required=True, help="the committed copy, e.g. docs/results/default")
    mme = sub.add_parser("mme-score", help="score MME results files (img, question, gt, pred) as the official tool")
    mme.add_argument("results_dir", help="directory of <subtask>.txt files")
    for name, (_, help_text) in STAGES.items():
        add_common_arguments(sub.add_parser(name, help=help_text))    # listed here; run by stages.command
    return parser


def version() -> str:
    """``relin <version> (<commit>)``: the installed release, and the checkout's commit when run from one."""
    import subprocess
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed
    from pathlib import Path

    try:
        release = installed("relin")
    except PackageNotFoundError:
        release = "(not installed)"
    try:
        commit = subprocess.run(["git", "describe", "--always", "--dirty=+"], capture_output=True, text=True,
                                cwd=Path(__file__).parent, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"relin {release}" + (f" (commit {commit})" if commit else "")


def main(argv: list[str] | None = None) -> int:
    """``relin <argv>``: a stage runs in a child of the pipeline's job server when one is exported
    (:mod:`relin.pipeline.jobserver`: its imports are done once), else here."""
    argv = sys.argv[1:] if argv is None else argv
    from .stages import STAGES

    if argv and argv[0] in STAGES:
        from .pipeline.jobserver.client import submit
        from .stages.command import run_stage

        code = submit(argv)
        return run_stage(argv) if code is None else code
    from ._auto import cancel_pending

    cancel_pending()
    args = _parser().parse_args(argv)
    return reported(args.command, lambda: _workflow_command(args))


def _workflow_command(args: argparse.Namespace) -> int:
    if args.command == "schema":
        from .pipeline.schema import write_schema

        write_schema(args.out)
        return 0
    if args.command == "check-config":
        from .config.params import load_params
        from .pipeline.preflight import check

        load_params(args.params, args.overlay, check)
        print(f"{' + '.join([args.params, *args.overlay])}: ok")
        return 0
    if args.command == "run-job":
        from .pipeline.invocation import run_job

        return run_job(args.rule, args.targets)
    if args.command == "status":
        from .pipeline.dvc_status import stage_lines

        print("\n".join(stage_lines()))
        return 0
    if args.command == "publish-report":
        from .report.publish import publish

        written = publish(args.report, args.to)
        print(f"{args.to}: {len(written)} files from {args.report} ({', '.join(written[:3])}, …)")
        return 0
    if args.command == "mme-score":
        from .eval.mme import format_scores, score_results_dir

        print(format_scores(score_results_dir(args.results_dir)))
        return 0
    raise AssertionError(f"unhandled command {args.command!r}")

if __name__ == "__main__":
    sys.exit(main())
