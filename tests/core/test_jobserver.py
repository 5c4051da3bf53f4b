"""The job server runs a stage command as the command would run it (its directory, environment, streams and exit
status), stops the job when the command is stopped or killed, and a command that cannot reach it runs in-process."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from relin.pipeline import jobserver
from relin.pipeline.jobserver.client import submit
from relin.pipeline.jobserver.server import remove_dead_servers, start_server

from ..workflow.conftest import workflow_env

VISION = {"lia_mtr.data": {"seed": 0, "image_size": 32, "max_objects": 4, "train_images": 4,
                           "mme_images_per_category": 1}}


@pytest.fixture(scope="module")
def server():
    previous = os.environ.get(jobserver.SERVER_ENV)
    running = start_server()
    deadline = time.time() + 120
    while not running.path.exists():
        assert running.process.poll() is None and time.time() < deadline, (running.folder / "server.log").read_text()
        time.sleep(0.05)
    yield running
    running.close()
    if previous is None:
        os.environ.pop(jobserver.SERVER_ENV, None)
    else:
        os.environ[jobserver.SERVER_ENV] = previous


def _env(server, **extra) -> dict[str, str]:
    return workflow_env(**{jobserver.SERVER_ENV: f"{socket.gethostname()}:{server.path}", "RELIN_TRACKING": "0",
                           **extra})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:      # a zombie awaiting the server's wait is gone already
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_a_stage_runs_in_a_child_of_the_server_in_the_commands_directory_and_streams(server, tmp_path, monkeypatch):
    """``submit`` (what ``relin <stage>`` does first) returns the child's status, so the stage ran in the server;
    its relative output lands in the command's directory and its lines in the command's redirected streams."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RELIN_TRACKING", "0")
    with open("out.txt", "w") as out, open("err.txt", "w") as err:
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            code = submit(["lia-mtr-synth-vision", "--config", json.dumps(VISION), "--out", "vision"])
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
    assert code == 0, Path("err.txt").read_text()
    assert os.listdir(f"/proc/{server.process.pid}/task") == [str(server.process.pid)]   # forks with one thread
    assert json.loads((tmp_path / "vision" / "stats.json").read_text())["train_images"] == 4
    assert "lia-mtr-synth-vision" in Path("out.txt").read_text() + Path("err.txt").read_text()


def test_the_exit_status_and_the_error_line_are_the_commands(server, tmp_path):
    """Through the ``relin`` command: --help exits 0 with its usage on stdout; a config mistake exits 2 with its one
    line on stderr, exactly as in-process."""
    help_ = subprocess.run(["relin", "lia-mtr-synth-vision", "--help"], cwd=tmp_path, env=_env(server),
                           capture_output=True, text=True, timeout=60)
    assert help_.returncode == 0 and help_.stdout.startswith("usage: relin lia-mtr-synth-vision")
    results = [subprocess.run(["relin", "lia-mtr-synth-vision", "--config", "{}", "--out", "x"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
               for env in (_env(server), workflow_env(RELIN_TRACKING="0"))]
    assert [r.returncode for r in results] == [2, 2]
    assert results[0].stderr == results[1].stderr
    assert results[0].stderr.startswith("relin lia-mtr-synth-vision: error: --config: missing section(s) lia_mtr.data")


def _hanging_job(server, tmp_path):
    """A stage blocked reading a FIFO nobody writes; returns the command's process and the job's pid."""
    data = tmp_path / "data"
    data.mkdir()
    os.mkfifo(data / "train.json")
    before = set(_children(server.process.pid))
    command = subprocess.Popen(["relin", "lia-mtr-mme-text", "--config", json.dumps({"eval": {"batch_size": 4}}),
                                "--llm", "llm", "--data", str(data), "--out", "answers", "--metrics", "m.json",
                                "--items", "items.csv"],
                               cwd=tmp_path, env=_env(server), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    deadline = time.time() + 60
    while not (new := set(_children(server.process.pid)) - before):
        assert time.time() < deadline and command.poll() is None, command.communicate()
        time.sleep(0.05)
    return command, new.pop()


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def test_stopping_the_command_stops_its_job(server, tmp_path):
    """SIGTERM to the command reaches the job: both end, with 143 (128 + SIGTERM) as a shell reports it."""
    command, job = _hanging_job(server, tmp_path)
    command.send_signal(signal.SIGTERM)
    assert command.wait(timeout=30) == 128 + signal.SIGTERM
    deadline = time.time() + 10
    while _alive(job):
        assert time.time() < deadline, "the job outlived its command"
        time.sleep(0.05)


def test_a_command_killed_outright_takes_its_job_with_it(server, tmp_path):
    """SIGKILL leaves the command no handler: the job sees its connection close and stops itself."""
    command, job = _hanging_job(server, tmp_path)
    command.kill()
    command.wait(timeout=30)
    deadline = time.time() + 10
    while _alive(job):
        assert time.time() < deadline, "the job outlived its killed command"
        time.sleep(0.05)


def test_a_server_that_does_not_answer_leaves_the_command_in_process(tmp_path):
    """A socket nobody listens on: one stderr line, then the stage runs here with the same result."""
    dead = tmp_path / "socket"
    env = workflow_env(**{jobserver.SERVER_ENV: f"{socket.gethostname()}:{dead}"})
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(dead))                    # bound, never listening: connect is refused
        proc = subprocess.run([sys.executable, "-m", "relin.cli", "lia-mtr-synth-vision", "--config", "{}", "--out",
                               "x"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 2, proc.stderr
    assert lines[0] == f"relin: job server at {dead} does not answer; this command runs in-process"
    assert lines[1].startswith("relin lia-mtr-synth-vision: error: --config: missing section(s)")


def test_another_hosts_server_is_not_tried(server, monkeypatch):
    """A cluster job sees the address its pipeline exported on the login host: it runs in-process, silently."""
    monkeypatch.setenv(jobserver.SERVER_ENV, f"another-{socket.gethostname()}:{server.path}")
    assert submit(["lia-mtr-synth-vision", "--help"]) is None


def test_no_server_starts_on_a_gpu_machine(monkeypatch):
    import glob

    monkeypatch.setattr(glob, "glob", lambda pattern: ["/dev/nvidia0"] if "nvidia" in pattern else [])
    monkeypatch.delenv(jobserver.SERVER_ENV, raising=False)
    assert start_server() is None and jobserver.SERVER_ENV not in os.environ


def test_a_killed_pipelines_server_folder_is_removed_and_a_live_one_kept(server, tmp_path):
    import tempfile

    stale = Path(tempfile.mkdtemp(prefix=jobserver.FOLDER_PREFIX))
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    os.utime(server.folder, (time.time() - 3600, time.time() - 3600))
    removed = remove_dead_servers()
    assert stale in removed and not stale.exists()
    assert server.folder.exists() and server.folder not in removed


def test_a_job_runs_torch_on_the_threads_its_command_was_given():
    """torch sized its pool from the server's environment at import; the child takes the command's OMP_NUM_THREADS
    (Snakemake's ``threads``), else two one-thread jobs would each run on every core."""
    script = ("import os, torch\n"
              "from relin.pipeline.jobserver.server import take_thread_budget\n"
              "before = torch.get_num_threads()\n"
              "os.environ['OMP_NUM_THREADS'] = '1'\n"
              "take_thread_budget()\n"
              "print(before, torch.get_num_threads())\n")
    out = subprocess.run([sys.executable, "-c", script], env=workflow_env(OMP_NUM_THREADS="2"), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "1"]
