"""Private ``/tmp`` folders holding one Unix socket each: the pipeline's tracking service and its job server.

A pipeline killed outright (SIGKILL runs no exit handler) leaves its folder behind; the next pipeline removes the
folders of this user that nobody listens on.
"""
from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

SOCKET = "socket"


def remove_dead(prefix: str, min_age_s: float = 60.0) -> list[Path]:
    """Remove this user's ``<tmp>/<prefix>*`` folders whose socket refuses connections or is gone. A folder younger
    than ``min_age_s`` may belong to a process still starting; one whose socket is busy or unreadable is kept (not
    known to be dead)."""
    removed = []
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        try:
            if folder.stat().st_uid != os.getuid() or time.time() - folder.stat().st_mtime < min_age_s:
                continue
        except OSError:
            continue
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            try:
                probe.connect(str(folder / SOCKET))
            except (ConnectionRefusedError, FileNotFoundError):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
            except OSError:
                pass
    return removed
