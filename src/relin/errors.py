"""User-facing errors: the CLI prints one line for each and exits non-zero, with no traceback."""


class UserError(Exception):
    """A mistake in what the user gave (config, path, data, checkpoint): one clear line, exit 2."""

    exit_code = 2


class ConfigError(UserError):
    """A config key is unknown, missing, of the wrong type or out of range."""


class InputError(UserError):
    """An input path, dataset or checkpoint is missing or not in the expected format."""


class TrainingDiverged(UserError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""

    exit_code = 3


def reported(command: str, action) -> int:
    """Run ``action()`` (returns an exit status) under the CLI's contract: a :class:`UserError` is one line on stderr
    and its exit code, an interrupt one line and 130."""
    import sys

    try:
        return action()
    except UserError as err:
        print(f"relin {command}: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print(f"relin {command}: interrupted", file=sys.stderr)
        return 130
