"""The command's side: hand ``relin <stage>`` to the exported server (:mod:`relin.pipeline.jobserver`)."""
from __future__ import annotations

import json
import os
import signal
import socket
import sys
from pathlib import Path

from . import FORWARDED, HEADER, SERVER_ENV, STREAMS


def submit(argv: list[str]) -> int | None:
    """Run ``relin <argv>`` in a child of the exported server and return its exit status (128 + n for a child
    killed by signal n, as a shell reports it); ``None`` when this command should run in-process."""
    host, _, path = os.environ.get(SERVER_ENV, "").rpartition(":")
    if (not path or host != socket.gethostname() or any(k in os.environ for k in ("LOCAL_RANK", "RANK"))
            or not Path(path).exists()):
        return None             # none, another host's (a cluster job), a launcher's rank, or still importing
    # From the first byte sent, a signal is the job's: one that comes before the child's pid is known waits for it.
    job: dict[str, int] = {}
    pending: list[int] = []

    def forward(signum: int, _frame) -> None:
        if "pid" in job:
            _forward(job["pid"], signum)
        else:
            pending.append(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.connect(path)
            payload = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
            socket.send_fds(sock, [HEADER.pack(len(payload))], list(STREAMS))
            sock.sendall(payload)
            reader = sock.makefile("rb")
            job["pid"] = json.loads(reader.readline())["pid"]
        except (OSError, ValueError, KeyError):
            print(f"relin: job server at {path} does not answer; this command runs in-process", file=sys.stderr)
            return None
        for signum in pending:
            _forward(job["pid"], signum)
        line = reader.readline()
    finally:
        sock.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pending and "pid" not in job:
            os.kill(os.getpid(), pending[0])        # stopped before a job existed: as the command itself
    if not line:
        print(f"relin: job server at {path} closed before the job's exit status", file=sys.stderr)
        return 1
    return int(json.loads(line)["exit"])


def _forward(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass
