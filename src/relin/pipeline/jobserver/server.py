"""The server's side: pre-import, then fork a child per command (:mod:`relin.pipeline.jobserver`)."""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import tempfile
from pathlib import Path

from ..socket_folders import SOCKET, remove_dead
from . import FOLDER_PREFIX, FORWARDED, HEADER, SERVER_ENV, STREAMS

# Modules every stage imports, loaded once in the server; relin's own code is not (a child reads it from disk).
PRELOAD = ("numpy", "torch", "safetensors.torch", "transformers", "transformers.modeling_utils",
           "transformers.models.qwen2.modeling_qwen2", "transformers.models.qwen3.modeling_qwen3",
           "transformers.models.gpt_neox.modeling_gpt_neox", "transformers.models.llama.modeling_llama")


class JobServer:
    """The server process, started by the pipeline; :meth:`close` stops it (its children finish their jobs)."""

    def __init__(self) -> None:
        import subprocess

        self.folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
        self.path = self.folder / SOCKET
        # OpenBLAS (numpy's, scipy's) starts its worker threads when loaded unless told to use one: the server must
        # have no thread but its own to fork safely, so its children's numpy runs BLAS on one thread (a stage's
        # compute is torch's, whose thread budget the child sets).
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
        with open(self.folder / "server.log", "wb") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "relin.pipeline.jobserver.server", str(self.path)],
                                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                                            start_new_session=True)

    def close(self) -> None:
        import shutil
        import subprocess

        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()

        shutil.rmtree(self.folder, ignore_errors=True)


# Device files of GPUs (NVIDIA, AMD): where they exist no server runs. A GPU job pays the imports in seconds against
# minutes of work, and an import that touches the driver (a device count) would leave every forked child a CUDA
# context it cannot use.
GPU_DEVICES = ("/dev/nvidia[0-9]*", "/dev/kfd")


def start_server() -> JobServer | None:
    """Start the server and export its socket to the processes this one starts; ``None`` on a GPU machine."""
    import glob

    if any(glob.glob(pattern) for pattern in GPU_DEVICES):
        return None
    remove_dead_servers()
    server = JobServer()
    os.environ[SERVER_ENV] = f"{socket.gethostname()}:{server.path}"
    return server


def remove_dead_servers(min_age_s: float = 60.0) -> list[Path]:
    """Remove the server folders of pipelines killed outright (:func:`..socket_folders.remove_dead`); a folder
    younger than ``min_age_s`` may be a server still importing."""
    return remove_dead(FOLDER_PREFIX, min_age_s)


def serve(path: str) -> None:
    """Pre-import :data:`PRELOAD`, bind ``path``, and fork a child per command until the parent (the pipeline)
    is gone or SIGTERM; each command's exit status goes back on its connection once the child is reaped."""
    import importlib
    import threading

    from ..._auto import cancel_pending
    from .lifetime import die_with_parent

    parent = os.getppid()
    die_with_parent(parent)     # SIGTERM when the pipeline dies, even by SIGKILL; its children stop themselves
    cancel_pending()            # relin's model classes register in each child, from the code on disk
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else threading.active_count()
    if threads != 1:
        raise SystemExit(f"relin job server: {threads} threads after the imports; a process with threads cannot "
                         f"fork safely, so none runs (each command runs in-process)")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(64)
    os.rename(path + ".tmp", path)          # commands find the socket only once it accepts
    waiting: dict[int, socket.socket] = {}
    # A child's exit wakes the loop at once (its status goes back without delay): SIGCHLD writes to a pipe.
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while os.getppid() == parent:
            ready, _, _ = select.select([listener, wake_read], [], [], 1.0)
            if wake_read in ready:
                os.read(wake_read, 4096)        # a byte per signal; any left over only wakes the loop once more
            _reap(waiting)
            if listener not in ready:
                continue
            conn, _ = listener.accept()
            conn.settimeout(None)
            try:
                pid = _fork_job(conn, listener)
            except (OSError, ValueError, KeyError) as err:
                print(f"relin job server: a command's request was unreadable ({err})", file=sys.stderr, flush=True)
                conn.close()
                continue
            waiting[pid] = conn
            try:
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            except OSError:
                pass        # the command is gone: its job sees the closed connection and stops
    finally:
        listener.close()
        Path(path).unlink(missing_ok=True)


def _reap(waiting: dict[int, socket.socket]) -> None:
    while waiting:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        try:
            conn.sendall(json.dumps({"exit": code if code >= 0 else 128 - code}).encode() + b"\n")
        except OSError:
            pass            # the command is gone
        conn.close()


def _fork_job(conn: socket.socket, listener: socket.socket) -> int:
    """Read one command (its header with the three stream descriptors, then its JSON) and fork its child."""
    header, fds, _, _ = socket.recv_fds(conn, HEADER.size, len(STREAMS))
    if len(fds) != len(STREAMS) or len(header) != HEADER.size:
        for fd in fds:
            os.close(fd)
        raise ValueError("expected a header and three stream descriptors")
    (size,), payload = HEADER.unpack(header), b""
    while len(payload) < size:
        chunk = conn.recv(size - len(payload))
        if not chunk:
            raise ValueError("the command closed mid-request")
        payload += chunk
    request = json.loads(payload)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    # A signal the command forwards as soon as it learns the pid must meet the job's handlers, not the server's
    # (whose SIGTERM exits 0): blocked across the fork, delivered once the child has a process's defaults.
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    pid = os.fork()
    if pid:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        for fd in fds:
            os.close(fd)
        return pid
    listener.close()
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    code = 1
    try:
        code = _run_child(request, fds, conn)
    finally:
        os._exit(code)


def _run_child(request: dict, fds: list[int], conn: socket.socket) -> int:
    """In the forked child: become the command (streams, directory, environment, argv) and run it; the exit
    status, normal exit handling included (non-daemon threads joined, atexit handlers run, streams flushed)."""
    import atexit
    import threading

    for target, fd in zip(STREAMS, fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    take_thread_budget()
    sys.argv = ["relin", *request["argv"]]
    threading.Thread(target=_stop_when_gone, args=(conn,), daemon=True, name="relin-job-watch").start()
    from ...stages.command import run_stage

    try:
        code = run_stage(request["argv"])
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if not isinstance(done.code, (int, type(None))):
            print(done.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # noqa: BLE001 - reported as the interpreter would, exit status 1
        import traceback

        traceback.print_exc()
        code = 1
    threading._shutdown()       # join the job's non-daemon threads, as interpreter exit does
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def take_thread_budget() -> None:
    """Run torch on the threads the command was given (``OMP_NUM_THREADS``, which Snakemake sets to the rule's
    ``threads``), as the command would in-process, where torch reads it at import: here torch sized its pool from the
    server's environment, and two one-thread jobs each on every core oversubscribe the cores (an evaluation ran ~10x
    slower). Every stage takes its budget here, so none sets threads itself."""
    raw = os.environ.get("OMP_NUM_THREADS", "")
    if raw.isdigit() and int(raw) > 0 and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(raw))


def _stop_when_gone(conn: socket.socket) -> None:
    """The command never writes after its request: end of stream means it is gone, and so is the job."""
    try:
        while conn.recv(1):
            pass
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    serve(sys.argv[1])
