"""``relin <stage> ...`` in this process: the stage's own parser, its config sections, its run, and the CLI's
error contract (one line on stderr and a non-zero exit for a user mistake). The ``relin`` command and the job
server's children (:mod:`relin.pipeline.jobserver`) both run a stage through :func:`run_stage`."""
from __future__ import annotations

import argparse
import json

from ..errors import UserError, reported
from . import STAGES, load_stage


class OneLineParser(argparse.ArgumentParser):
    """argparse with the CLI's error contract: a mistake is one line naming it (no usage block), exit 2, and an
    option it does not know is named before any missing one (argparse names the missing ones first)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}; `{self.prog} --help` lists the options\n")

    def parse_args(self, args=None, namespace=None):
        import difflib
        import sys

        words = sys.argv[1:] if args is None else list(args)
        known = list(self._option_string_actions)
        for word in words if self._subparsers is None else ():   # a subcommand's options are its parser's
            if word == "--":
                break
            name = word.split("=", 1)[0]
            if not name.startswith("--") or name in known:
                continue
            if self.allow_abbrev and sum(option.startswith(name) for option in known) == 1:
                continue        # an unambiguous abbreviation, as argparse reads it
            close = difflib.get_close_matches(name, [o for o in known if o.startswith("--") and o != "--help"],
                                              n=1, cutoff=0.75)
            self.error(f"unrecognized option {name}" + (f" (did you mean {close[0]}?)" if close else ""))
        return super().parse_args(args, namespace)


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    parser.add_argument("--overlay", action="append", default=[], help="config overlay(s), deep-merged in order")
    parser.add_argument("--config", default=None, help="JSON of the config sections this stage reads")


def stage_sections(args: argparse.Namespace, stage):
    """The sections ``stage`` reads: from ``--config`` (JSON of exactly those sections: what its Snakemake rule
    passes) or from ``--params`` plus overlays."""
    from ..config.params import Sections

    if args.config is not None:
        try:
            raw = json.loads(args.config)
        except json.JSONDecodeError as err:
            raise UserError(f"--config: not valid JSON ({err.msg} at char {err.pos})") from None
        missing = [s for s in stage.config_sections(args) if s not in raw]
        if missing:
            raise UserError(f"--config: missing section(s) {', '.join(missing)} that this stage reads")
        return Sections(raw, stage.config_sections(args))
    return Sections.from_params_file([args.params, *args.overlay], stage.config_sections(args))


def stage_parser(name: str) -> argparse.ArgumentParser:
    """The parser of ``relin <name>``: the common options and the stage's own arguments."""
    parser = OneLineParser(prog=f"relin {name}", description=STAGES[name][1])
    add_common_arguments(parser)
    load_stage(name).add_arguments(parser)
    return parser


def run_stage(argv: list[str]) -> int:
    """Run the stage ``argv[0]`` with the arguments ``argv[1:]``; returns the exit status."""
    from .._auto import cancel_pending
    from ..logs import quiet_libraries
    from ..pipeline.jobserver.lifetime import watch_pipeline

    cancel_pending()
    watch_pipeline()        # a job ends with the pipeline that started it, however that ends
    name = argv[0]
    stage = load_stage(name)
    args = stage_parser(name).parse_args(argv[1:])
    args.command = name

    def run() -> int:
        quiet_libraries()
        stage.run(args, stage_sections(args, stage))
        return 0

    return reported(name, run)
