"""Tracking never stops a stage: a busy store queues writes (logged later, in order), an unreachable
server is refused in one line, and the runs of dead processes are closed by the next pipeline."""
import json
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from relin import tracking
from relin.config.tracking import TrackingConfig

from ..workflow.conftest import workflow_env


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = TrackingConfig(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", system_metrics=False, flush_every=5)
    monkeypatch.setenv(tracking.CONFIG_ENV, json.dumps({"tracking_uri": cfg.tracking_uri, "system_metrics": False,
                                                        "flush_every": 5}))
    monkeypatch.delenv(tracking.PARENT_ENV, raising=False)
    monkeypatch.delenv("RELIN_TRACKING", raising=False)
    tracking.init_pipeline(cfg)  # creates the store before anything locks it
    return cfg


def _hold_exclusive_lock(db, seconds, locked):
    connection = sqlite3.connect(db, timeout=30)
    connection.execute("BEGIN EXCLUSIVE")
    locked.set()
    time.sleep(seconds)
    connection.rollback()
    connection.close()


def _metric_steps(cfg, run_id, key):
    return [m.step for m in tracking._client(cfg).get_metric_history(run_id, key)]


def test_a_locked_store_delays_writes_but_loses_none(store, tmp_path, monkeypatch):
    monkeypatch.setattr(tracking.outbox, "RETRY_EVERY_S", 1.0)
    with tracking.stage_run("probe", {"a": 1}) as tracker:
        locked = threading.Event()
        holder = threading.Thread(target=_hold_exclusive_lock, args=(tmp_path / "mlflow.db", 8, locked))
        holder.start()
        locked.wait()
        began = time.monotonic()
        for step in range(1, 41):
            tracker.log_metrics({"loss": 1.0 / step}, step)
            time.sleep(0.05)
        assert time.monotonic() - began < 25, "logging must not hold up the steps for the whole lock"
        holder.join()
    run = tracking._client(store).get_run(tracker.run_id)
    assert run.info.status == "FINISHED" and run.data.params == {"a": "1"}
    assert _metric_steps(store, tracker.run_id, "loss") == list(range(1, 41))


def test_an_input_another_stage_records_at_the_same_moment_is_still_linked(store, tmp_path, monkeypatch):
    """Two stages reading one artifact insert the same dataset row at once: the loser's insert breaks
    the row's unique key, and its input must still be linked (the second attempt finds the row)."""
    from mlflow.tracking import MlflowClient
    from sqlalchemy.exc import IntegrityError

    (tmp_path / "data.txt").write_text("shared input")
    real, raised = MlflowClient.log_inputs, []

    def lose_the_race_once(self, run_id, datasets=None, models=None):
        if not raised:
            raised.append(run_id)
            raise IntegrityError("INSERT INTO datasets", {}, Exception(
                "UNIQUE constraint failed: datasets.experiment_id, datasets.name, datasets.digest"))
        return real(self, run_id, datasets=datasets, models=models)

    monkeypatch.setattr(MlflowClient, "log_inputs", lose_the_race_once)
    with tracking.stage_run("reader", {}, inputs=[tmp_path / "data.txt"]) as tracker:
        pass
    inputs = tracking._client(store).get_run(tracker.run_id).inputs.dataset_inputs
    assert raised and [i.dataset.name for i in inputs] == [str(tmp_path / "data.txt")]


def test_writes_the_store_refuses_until_the_end_are_saved_and_replayed(store, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tracking.outbox, "CLOSE_PATIENCE_S", 1.0)
    locked = threading.Event()
    holder = threading.Thread(target=_hold_exclusive_lock, args=(tmp_path / "mlflow.db", 15, locked))
    with tracking.stage_run("probe", {"a": 1}) as tracker:
        holder.start()
        locked.wait()
        tracker.log_metrics({"loss": 0.5}, 1)
        tracker.flush()
    (saved,) = (tmp_path / tracking.OUTBOX_DIR).glob("probe-*.json")
    assert f"saved to {saved.relative_to(tmp_path)}" in capsys.readouterr().err
    holder.join()
    assert tracking.replay_outboxes(store) == 1 and not saved.exists()
    run = tracking._client(store).get_run(tracker.run_id)
    assert run.info.status == "FINISHED" and _metric_steps(store, tracker.run_id, "loss") == [1]


def test_a_written_model_is_a_logged_model_of_its_run_with_metrics_linked_to_its_dataset(store, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.txt").write_text("rows")
    (tmp_path / "results" / "x" / "model").mkdir(parents=True)
    with tracking.stage_run("probe", {"a": 1}, inputs=["data"]) as tracker:
        tracker.log_model("results/x/model", "x", "relin_hybrid", params={"layers": 4}, metrics={"loss": 0.5},
                          dataset="data")
    client = tracking._client(store)
    experiment = client.get_experiment_by_name(store.experiment)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    (model,) = client.search_logged_models([experiment.experiment_id])
    assert (model.name, model.model_type, model.status, model.source_run_id) == \
        ("x", "relin_hybrid", "READY", tracker.run_id)
    assert model.params == {"layers": "4"} and model.tags["relin.path"] == "results/x/model"
    (metric,) = model.metrics
    inputs = client.get_run(tracker.run_id).inputs.dataset_inputs
    assert (metric.key, metric.value, metric.dataset_name) == ("loss", 0.5, "data")
    assert metric.dataset_digest == inputs[0].dataset.digest


def test_runs_of_dead_processes_are_closed_and_live_ones_kept(store):
    client = tracking._client(store)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    exp = client.get_experiment_by_name(store.experiment).experiment_id
    gone = client.create_run(exp, tags={**tracking._process_tags(), "relin.pid": dead.stdout.strip()})
    alive = client.create_run(exp, tags=tracking._process_tags())
    assert tracking.close_dead_runs(store) == [gone.info.run_id]
    assert client.get_run(gone.info.run_id).info.status == "KILLED"
    assert client.get_run(alive.info.run_id).info.status == "RUNNING"


def test_a_terminated_stage_closes_its_run_as_killed(store, tmp_path):
    script = ("import time; from relin import tracking\n"
              "with tracking.stage_run('probe', {}) as t:\n"
              "    open('run_id', 'w').write(t.run_id)\n"
              "    time.sleep(60)\n")
    env = workflow_env(**{tracking.CONFIG_ENV: json.dumps({"tracking_uri": store.tracking_uri,
                                                           "system_metrics": False})})
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, env=env)
    deadline = time.monotonic() + 60
    while not (tmp_path / "run_id").is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.terminate()
    assert proc.wait(timeout=60) != 0
    run = tracking._client(store).get_run((tmp_path / "run_id").read_text())
    assert run.info.status == "KILLED"


def test_unreachable_tracking_server_is_one_line_within_seconds():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens once the socket closes
    cfg = TrackingConfig(tracking_uri=f"http://127.0.0.1:{port}")
    began = time.monotonic()
    with pytest.raises(tracking.TrackingUnavailable) as err:
        tracking.check_store(cfg)
    assert time.monotonic() - began < 10
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"tracking.tracking_uri http://127.0.0.1:{port}: no MLflow")
    assert "tracking.enabled: false" in message


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_sqlite_store_is_one_line_and_left_as_found(tmp_path, damage):
    import sqlite3

    path = tmp_path / "mlflow.db"
    if damage == "garbage":
        path.write_bytes(b"not a database at all" * 100)
    else:
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE runs (id TEXT)")
            db.executemany("INSERT INTO runs VALUES (?)", [(str(i) * 50,) for i in range(2000)])
        path.write_bytes(path.read_bytes()[:100])
    before = path.read_bytes()
    with pytest.raises(tracking.TrackingUnavailable) as err:
        tracking.check_store(TrackingConfig(tracking_uri=f"sqlite:///{path}"))
    message = str(err.value)
    assert "\n" not in message and f"mv {path} {path}.damaged" in message
    assert path.read_bytes() == before


def test_a_locked_sqlite_store_is_one_line_after_the_timeout(tmp_path):
    import sqlite3

    path = tmp_path / "mlflow.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(tracking.TrackingUnavailable, match="stayed locked for 1 s"):
            tracking._check_sqlite(f"sqlite:///{path}", 1.0)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    tracking.check_store(TrackingConfig(tracking_uri=f"sqlite:///{path}"))  # free again: no error


def test_a_stage_runs_name_says_which_model_it_made():
    """Eighteen evaluations, seven bridge NIAH probes: each child run's name carries the model its first output
    belongs to, so the MLflow UI lists them apart."""
    from relin.tracking.stage_runs import run_name

    assert run_name("eval-lm", ["results/eval/opal-onpolicy/metrics.json"]) == "eval-lm · opal-onpolicy"
    assert run_name("hedgemamba-finetune", ["results/hedgemamba/random-s1/model"]) == \
        "hedgemamba-finetune · random-s1"
    assert run_name("eval-mme", ["results/lia_mtr/mme/lia_mtr-s1/answers"]) == "eval-mme · lia_mtr-s1"
    assert run_name("synth-text", ["results/data/synth_text"]) == "synth-text", "no label that repeats the stage"
    assert run_name("report", []) == "report"
