"""The pipeline's tracking service writes a job's run as the job would itself, the job never importing MLflow;
a job that cannot reach it writes its own (a busy store behind it: test_tracking's locked-store test)."""
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from relin import tracking

from ..workflow.conftest import workflow_env
from .test_tracking import _metric_steps

# A stage as a job runs it: params, an input, per-step metrics and a logged model; it reports which MLflow modules
# it imported.
STAGE = """
import json, sys
from pathlib import Path
from relin import tracking
Path("data.txt").write_text("rows")
with tracking.stage_run("probe", {"lr": 0.1}, inputs=["data.txt"], outputs=["model"]) as t:
    for step in range(1, 13):
        t.log_metrics({"loss": 1.0 / step}, step)
    Path("model").mkdir()
    (Path("model") / "weights.safetensors").write_text("w")
    t.log_model("model", "probe", "relin_hybrid", metrics={"final_loss": 0.1}, dataset="data.txt")
    __import__("time").sleep(SLEEP)
print(json.dumps({"run_id": t.run_id, "mlflow": sorted(m for m in sys.modules if m.split(".")[0] == "mlflow")}))
"""


def _run_stage(tmp_path, store, sleep_s=0.0, **cfg):
    env = workflow_env(**{tracking.CONFIG_ENV: json.dumps({"tracking_uri": store.tracking_uri, "flush_every": 5,
                                                           "system_metrics": False, **cfg})})
    if address := os.environ.get(tracking.SERVICE_ENV):
        env[tracking.SERVICE_ENV] = address
    done = subprocess.run([sys.executable, "-c", STAGE.replace("SLEEP", str(sleep_s))], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def _check_run(store, run_id):
    client = tracking._client(store)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.params == {"lr": "0.1"}
    assert _metric_steps(store, run_id, "loss") == list(range(1, 13))
    assert [i.dataset.name for i in run.inputs.dataset_inputs] == ["data.txt"]
    (model,) = client.search_logged_models([run.info.experiment_id])
    assert (model.source_run_id, model.status, model.tags["relin.path"]) == (run_id, "READY", "model")
    return run


def test_a_job_under_the_service_writes_its_run_without_importing_mlflow(service, store, tmp_path):
    job, _ = _run_stage(tmp_path, store, sleep_s=1.5, system_metrics=True, system_metrics_interval=0.3)
    assert job["mlflow"] == [], "the job imported MLflow"
    run = _check_run(store, job["run_id"])
    assert "system/cpu_utilization_percentage" in run.data.metrics, "the service samples the job's machine"
    manifest = json.loads((tmp_path / "model.relin-run.json").read_text())
    assert manifest["run_id"] == job["run_id"] and manifest["model_id"]


def test_a_job_that_cannot_reach_the_service_writes_its_run_itself(store, tmp_path, monkeypatch):
    monkeypatch.setenv(tracking.SERVICE_ENV, f"{socket.gethostname()}:{tmp_path / 'gone' / 'socket'}")
    job, err = _run_stage(tmp_path, store)
    assert "does not answer; this stage writes its run itself" in err
    assert job["mlflow"], "written in-process"
    _check_run(store, job["run_id"])


def test_a_service_on_another_host_is_not_tried(store, tmp_path, monkeypatch):
    monkeypatch.setenv(tracking.SERVICE_ENV, f"not-{socket.gethostname()}:/tmp/none/socket")
    job, err = _run_stage(tmp_path, store)
    assert "does not answer" not in err
    _check_run(store, job["run_id"])


def test_a_request_the_store_refuses_comes_back_as_its_error(service, store):
    conn = tracking.service.ServiceConnection.connect(store)
    try:
        with pytest.raises(tracking.service.ServiceError, match="unknown outbox entry 'nonsense'"):
            conn.apply({"op": "nonsense"}, "0" * 32)
    finally:
        conn.close()


def test_a_job_configured_for_another_store_writes_its_own(service, store, tmp_path):
    other = tracking.tracking_config()
    other.tracking_uri = f"sqlite:///{tmp_path / 'other.db'}"
    assert tracking.service.ServiceConnection.connect(other) is None
    tracking.service.ServiceConnection.connect(store).close()  # the same service answers a job of its store


def test_the_socket_folder_of_a_killed_pipeline_is_removed_and_a_live_one_kept(service, tmp_path):
    dead = Path(tempfile.mkdtemp(prefix=tracking.service.FOLDER_PREFIX))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(dead / "socket"))  # closed without unlinking: what SIGKILL leaves
    live = service.path.parent
    for folder in (dead, live):
        os.utime(folder, (0, 0))
    assert dead in tracking.service.remove_dead_services()
    assert not dead.exists() and live.is_dir()
