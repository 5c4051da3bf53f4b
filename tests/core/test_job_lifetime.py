"""A job lives no longer than its pipeline, and one job has one writer (issue #63): a stage whose pipeline is killed
outright stops (in-process and in a child of the job server), the job server dies with the pipeline, and a second
writer of the same output is refused in one line naming the first, unless the first is a job stopping after its
pipeline died, which it waits for."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from relin.pipeline import jobserver
from relin.pipeline.jobserver import lifetime
from relin.pipeline.jobserver.job_lock import lock_path

from ..workflow.conftest import workflow_env

VISION = {"lia_mtr.data": {"seed": 0, "image_size": 32, "max_objects": 4, "train_images": 4,
                           "mme_images_per_category": 1}}
SLEEPER = "import time; print('up', flush=True); time.sleep(600)"


def _pipeline() -> subprocess.Popen:
    """A stand-in for the ``snakemake`` process: something a job can watch, to be killed with SIGKILL."""
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "up"
    return proc


def _name(proc: subprocess.Popen) -> str:
    return f"{socket.gethostname()}:{proc.pid}:{lifetime.process_start(proc.pid)}"


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def _hanging_stage(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen:
    """``relin lia-mtr-mme-text`` blocked reading a FIFO nobody writes (its data), as a long job would run."""
    data = tmp_path / "data"
    data.mkdir()
    os.mkfifo(data / "train.json")
    return subprocess.Popen(["relin", "lia-mtr-mme-text", "--config", json.dumps({"eval": {"batch_size": 4}}),
                             "--llm", "llm", "--data", str(data), "--out", "answers", "--metrics", "m.json",
                             "--items", "items.csv"],
                            cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_an_in_process_stage_stops_when_its_pipeline_is_killed(tmp_path):
    pipeline = _pipeline()
    stage = _hanging_stage(tmp_path, workflow_env(RELIN_TRACKING="0", **{lifetime.PIPELINE_ENV: _name(pipeline)}))
    time.sleep(3)                           # the stage is up and blocked
    assert stage.poll() is None, stage.communicate()
    pipeline.kill()
    pipeline.wait()
    _, err = stage.communicate(timeout=30)
    assert stage.returncode == 128 + signal.SIGTERM or stage.returncode == -signal.SIGTERM, err
    assert f"relin: the pipeline that started this job (pid {pipeline.pid}) is gone; the job stops" in err


def test_a_stage_of_another_host_or_of_no_pipeline_watches_nothing(monkeypatch):
    monkeypatch.delenv(lifetime.PIPELINE_ENV, raising=False)
    assert not lifetime.watch_pipeline()
    monkeypatch.setenv(lifetime.PIPELINE_ENV, f"another-{socket.gethostname()}:1:0.0")
    assert not lifetime.watch_pipeline()


def test_a_reused_pid_is_not_taken_for_the_pipeline():
    assert lifetime.alive(os.getpid(), str(lifetime.process_start(os.getpid())))
    assert not lifetime.alive(os.getpid(), "12.5")      # this pid, another start: the pipeline is gone


@pytest.fixture
def server_of_a_pipeline(tmp_path):
    """A job server started by a stand-in pipeline process (as ``snakemake`` starts it), and that process."""
    script = ("import os, sys, time\n"
              "from relin.pipeline.jobserver.server import start_server\n"
              "server = start_server()\n"
              "print(server.process.pid, server.path, flush=True)\n"
              "time.sleep(600)\n")
    pipeline = subprocess.Popen([sys.executable, "-c", script], env=workflow_env(), stdout=subprocess.PIPE, text=True)
    pid, path = pipeline.stdout.readline().split()
    deadline = time.monotonic() + 120
    while not Path(path).exists():
        assert time.monotonic() < deadline and pipeline.poll() is None, "the job server never listened"
        time.sleep(0.05)
    yield pipeline, int(pid), path
    for proc in (pipeline,):
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    try:
        os.kill(int(pid), signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_a_job_of_the_server_and_the_server_itself_end_with_a_killed_pipeline(server_of_a_pipeline, tmp_path):
    pipeline, server_pid, path = server_of_a_pipeline
    env = workflow_env(RELIN_TRACKING="0", **{lifetime.PIPELINE_ENV: _name(pipeline),
                                              jobserver.SERVER_ENV: f"{socket.gethostname()}:{path}"})
    command = _hanging_stage(tmp_path, env)
    deadline = time.monotonic() + 60
    while not (children := psutil.Process(server_pid).children()):
        assert time.monotonic() < deadline and command.poll() is None, command.communicate()
        time.sleep(0.05)
    job = children[0].pid
    pipeline.kill()                                  # kill -9 of the pipeline alone
    pipeline.wait()
    assert _gone(server_pid, 15), "the job server outlived its pipeline"
    assert _gone(job, 30), "the forked job outlived its pipeline"
    command.communicate(timeout=30)
    assert command.returncode != 0


def _holder(out: Path, pipeline: str = "", seconds: float = 600) -> subprocess.Popen:
    """A process holding ``out``'s job lock, as a stage writing it would."""
    script = (f"import time\nfrom relin.pipeline.jobserver.job_lock import job_lock\n"
              f"with job_lock({str(out)!r}):\n    print('held', flush=True)\n    time.sleep({seconds})\n")
    env = workflow_env(**({lifetime.PIPELINE_ENV: pipeline} if pipeline else {}))
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_writer_of_the_same_output_is_refused_in_one_line_naming_the_first(tmp_path):
    out = tmp_path / "vision"
    holder = _holder(out)
    try:
        proc = subprocess.run(["relin", "lia-mtr-synth-vision", "--config", json.dumps(VISION), "--out", str(out)],
                              cwd=tmp_path, env=workflow_env(RELIN_TRACKING="0"), capture_output=True, text=True,
                              timeout=120)
    finally:
        holder.kill()
        holder.wait()
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"relin lia-mtr-synth-vision: error: {out}: pid {holder.pid} (")
    assert "is writing it now; nothing was changed" in lines[0] and f"kill {holder.pid}" in lines[0]
    assert not out.exists(), "the refused stage wrote nothing"
    # its holder gone (killed: the kernel freed the lock, its file stays), the same command runs
    rerun = subprocess.run(["relin", "lia-mtr-synth-vision", "--config", json.dumps(VISION), "--out", str(out)],
                           cwd=tmp_path, env=workflow_env(RELIN_TRACKING="0"), capture_output=True, text=True,
                           timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert (out / "stats.json").is_file() and not lock_path(out).exists()


def test_a_writer_whose_pipeline_is_gone_is_waited_for(tmp_path):
    """The run after a killed one starts at once, while the killed run's job is still stopping: it waits."""
    dead = _pipeline()
    name = _name(dead)
    dead.kill()
    dead.wait()
    out = tmp_path / "vision"
    holder = _holder(out, pipeline=name, seconds=3)
    started = time.monotonic()
    proc = subprocess.run(["relin", "lia-mtr-synth-vision", "--config", json.dumps(VISION), "--out", str(out)],
                          cwd=tmp_path, env=workflow_env(RELIN_TRACKING="0"), capture_output=True, text=True,
                          timeout=120)
    holder.wait()
    assert proc.returncode == 0, proc.stderr
    assert f"relin: {out} is still held by pid {holder.pid}, a job whose pipeline is no longer running" in proc.stderr
    assert time.monotonic() - started >= 2
