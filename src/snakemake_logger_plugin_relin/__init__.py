"""relin's Snakemake console: Snakemake's own, with its command-line mistakes in one line (a Snakemake logger plugin).

Snakemake reads ``--configfile`` files and ``--config`` values before it reads the Snakefile, so a mistyped overlay
path, or a target written after ``--configfile`` or ``--config`` (both take every word after them), ended in a
traceback of Snakemake's own (26 to 28 lines) that no code of the workflow could shorten. A logger plugin is the one
place Snakemake lets a workflow print those: the project's workflow profile (``profiles/default/config.yaml``,
which Snakemake reads by itself) names it, ``logger: [relin]``. It prints everything else as Snakemake's default
console does (its handler, filter and formatter), with a failed job's own error line heading its block
(:func:`relin.pipeline.invocation.show_stage_errors`).
"""
from __future__ import annotations

import logging
import re
import sys

from snakemake_interface_logger_plugins.base import LogHandlerBase

# The last line of Snakemake's traceback for an overlay it cannot open, and for a --config word without "=".
_UNREADABLE = re.compile(r"^(?P<error>FileNotFoundError|IsADirectoryError): \[Errno \d+\] [^:]+: '(?P<path>.+)'$", re.M)
_NOT_A_PAIR = re.compile(r"Invalid config definition: .*\(Unparsable value: '(?P<word>.+)'\)$", re.M)


def command_line_mistake(text: str, argv: list[str]) -> str | None:
    """One line for a mistake in the command line Snakemake's error ``text`` reports, or ``None``."""
    if (found := _NOT_A_PAIR.search(text)) and "--config" in argv:
        word = found["word"]
        return (f"relin: --config {word}: not a KEY=VALUE pair (--config takes every word after it); put targets "
                f"before the options (snakemake {word} --cores 2 --config KEY=VALUE), and nest keys as YAML: "
                f"--config 'teacher={{train: {{steps: 5}}}}'")
    if (found := _UNREADABLE.search(text)) and found["path"] in argv:
        path = found["path"]
        what = "a directory" if found["error"] == "IsADirectoryError" else "no such file"
        if path.startswith("results/"):
            return (f"relin: --configfile {path}: {what}, and a target, not a config overlay (--configfile takes "
                    f"every word after it); put targets before the options: snakemake {path} --cores 2 "
                    f"--configfile FILE")
        return f"relin: --configfile {path}: {what} (expected a YAML overlay, e.g. workflow/configs/smoke.yaml)"
    return None


class LogHandler(LogHandlerBase):
    """Snakemake's default console handler, its command-line errors in one line."""

    def __post_init__(self) -> None:
        from snakemake.logging import ColorizingTextHandler, DefaultFilter, DefaultFormatter

        from relin.pipeline.invocation import DropFailedCommand, ShortJobErrors

        s = self.common_settings
        self.console = ColorizingTextHandler(nocolor=s.nocolor, stream=sys.stdout if s.stdout else sys.stderr)
        self.console.addFilter(DefaultFilter(s.quiet, s.debug_dag, s.verbose, s.dryrun, s.printshellcmds))
        self.console.addFilter(DropFailedCommand())
        self.console.setFormatter(ShortJobErrors(DefaultFormatter(s.quiet, s.show_failed_logs)))

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR and (line := command_line_mistake(str(record.msg), sys.argv[1:])):
            print(line, file=sys.stderr, flush=True)
            return
        self.console.handle(record)

    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return True

    @property
    def has_formatter(self) -> bool:
        return True

    @property
    def needs_rulegraph(self) -> bool:
        return False
