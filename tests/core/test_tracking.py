"""Tracking never stops a stage: a busy store queues writes (logged later, in order), an unreachable
server is refused in one line, and the runs of dead processes are closed by the next pipeline."""
import json
import os
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from relin import tracking
from relin.config.tracking import TrackingConfig

from ..workflow.conftest import workflow_env


def _hold_exclusive_lock(db, seconds, locked):
    connection = sqlite3.connect(db, timeout=30)
    connection.execute("BEGIN EXCLUSIVE")
    locked.set()
    time.sleep(seconds)
    connection.rollback()
    connection.close()


def _metric_steps(cfg, run_id, key):
    return [m.step for m in tracking._client(cfg).get_metric_history(run_id, key)]


@pytest.mark.parametrize("writer", ["in-process", "service"])
def test_a_locked_store_delays_writes_but_loses_none(store, tmp_path, monkeypatch, request, writer):
    monkeypatch.setattr(tracking.outbox, "RETRY_EVERY_S", 1.0)
    if writer == "service":  # the pipeline's writer: the same queue, the store's errors sent back over its socket
        request.getfixturevalue("service")
    with tracking.stage_run("probe", {"a": 1}) as tracker:
        assert (tracker._outbox._service is not None) == (writer == "service")
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


def _stage_writing_a_model(stage, out, inputs=()):
    """A stage that reads ``inputs`` and writes (and logs) a model folder ``out``."""
    with tracking.stage_run(stage, {}, inputs=list(inputs), outputs=[out]) as tracker:
        Path(out).mkdir(parents=True)
        (Path(out) / "model.safetensors").write_text(f"weights of {out}")
        tracker.log_model(out, stage, "relin_hybrid")
    return tracker


@pytest.mark.parametrize("found_by", ["manifest", "digest"])
def test_a_model_is_an_output_of_the_run_that_wrote_it_and_an_input_of_the_run_that_reads_it(store, tmp_path,
                                                                                            found_by):
    """The lineage the UI draws: model -> run -> model. A reader finds the model by the id in its manifest, or,
    when the producer's writes reached the store later (its manifest names no id), by its content digest."""
    from relin.io import manifest_path

    (tmp_path / "data.txt").write_text("rows")
    writer = _stage_writing_a_model("convert", "results/a/model")
    record = json.loads(manifest_path("results/a/model").read_text())
    if found_by == "digest":
        record.pop("model_id")
        manifest_path("results/a/model").write_text(json.dumps(record))
    reader = _stage_writing_a_model("align", "results/b/model", inputs=["results/a/model", "data.txt"])
    client = tracking._client(store)
    experiment = client.get_experiment_by_name(store.experiment).experiment_id
    models = {m.tags["relin.path"]: m for m in client.search_logged_models([experiment])}
    written, read = client.get_run(writer.run_id), client.get_run(reader.run_id)
    assert [m.model_id for m in written.outputs.model_outputs] == [models["results/a/model"].model_id]
    assert [m.model_id for m in read.inputs.model_inputs] == [models["results/a/model"].model_id]
    assert [m.model_id for m in read.outputs.model_outputs] == [models["results/b/model"].model_id]
    assert [(d.dataset.name, json.loads(d.dataset.source)["uri"]) for d in read.inputs.dataset_inputs] == \
        [("data.txt", "data.txt")], "a model is no dataset; a dataset's source is relative to the project"
    assert json.loads(manifest_path("results/b/model").read_text())["model_id"] == models["results/b/model"].model_id


RELATIVE_STORE = {"tracking_uri": "sqlite:///mlflow.db", "system_metrics": False}


def _in_folder(folder, script):
    """``script``'s stdout, run in ``folder`` by a process of its own as a stage is (MLflow keeps one engine per
    store URI in a process, so a relative URI must not be opened twice in one)."""
    env = workflow_env(**{tracking.CONFIG_ENV: json.dumps(RELATIVE_STORE)})
    env.pop(tracking.PARENT_ENV, None)
    return subprocess.run([sys.executable, "-c", script], cwd=folder, env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def _opened_from(folder, monkeypatch):
    """A client of the store in ``folder``, working there as ``mlflow ui`` started in the project does."""
    monkeypatch.chdir(folder)
    return tracking._client(TrackingConfig(tracking_uri=f"sqlite:///{folder / 'mlflow.db'}"))


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_moved_project_reads_its_artifacts_back(tmp_path, monkeypatch):
    """The store is found relative to the project, and so are its artifacts: move the folder, read them back."""
    project = tmp_path / "project"
    project.mkdir()
    run_id = _in_folder(project, (
        "import os; from relin import tracking\n"
        "tracking.init_pipeline(tracking.tracking_config())\n"
        "open('table.csv', 'w').write('a,b\\n1,2\\n'); os.chmod('table.csv', 0o600)\n"
        "with tracking.stage_run('probe', {}) as t:\n"
        "    t.log_artifact('table.csv', 'tables')\n"
        "print(t.run_id)\n"))
    moved = tmp_path / "moved"
    project.rename(moved)
    client = _opened_from(moved, monkeypatch)
    run = client.get_run(run_id)
    assert client.get_experiment(run.info.experiment_id).artifact_location == "mlruns/1"
    assert run.info.artifact_uri == f"mlruns/1/{run_id}/artifacts"
    copy = Path(client.download_artifacts(run_id, "tables/table.csv", str(tmp_path)))
    assert copy.read_text() == "a,b\n1,2\n"
    logged = moved / run.info.artifact_uri / "tables" / "table.csv"
    assert stat.S_IMODE(logged.stat().st_mode) == 0o666 & ~_umask(), "a logged file has the modes of every output"


def test_a_store_with_absolute_locations_is_relocated_when_the_project_moved(tmp_path, monkeypatch):
    """A store MLflow wrote absolute locations into (before relin kept them relative) follows the project: the next
    pipeline start rewrites them; a location outside any ``mlruns`` folder stays as chosen."""
    project, elsewhere = tmp_path / "project", tmp_path / "bucket"
    project.mkdir()
    run_id = _in_folder(project, (
        "from mlflow.tracking import MlflowClient\n"
        "client = MlflowClient('sqlite:///mlflow.db')\n"
        "run = client.create_run(client.create_experiment('relin'))\n"
        "open('notes.txt', 'w').write('kept')\n"
        "client.log_artifact(run.info.run_id, 'notes.txt')\n"
        f"client.create_experiment('chosen', artifact_location={str(elsewhere)!r})\n"
        "print(run.info.run_id)\n"))
    moved = tmp_path / "moved"
    project.rename(moved)
    before = _opened_from(moved, monkeypatch).get_run(run_id).info.artifact_uri
    assert before == f"{project}/mlruns/1/{run_id}/artifacts", "MLflow's own absolute location, now gone"
    _in_folder(moved, "from relin import tracking; tracking.init_pipeline(tracking.tracking_config())")
    client = _opened_from(moved, monkeypatch)
    assert client.get_run(run_id).info.artifact_uri == f"mlruns/1/{run_id}/artifacts"
    assert Path(client.download_artifacts(run_id, "notes.txt", str(tmp_path))).read_text() == "kept"
    assert client.get_experiment_by_name("chosen").artifact_location == str(elsewhere)


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
    assert run_name("lia-mtr-eval-mme", ["results/lia_mtr/mme/lia_mtr-s1/answers"]) == "lia-mtr-eval-mme · lia_mtr-s1"
    assert run_name("synth-text", ["results/data/synth_text"]) == "synth-text", "no label that repeats the stage"
    assert run_name("opal-onpolicy", ["results/opal/onpolicy/model"]) == "opal-onpolicy", "nor a word of it"
    assert run_name("opal-onpolicy", ["results/opal/onpolicy-s1/model"]) == "opal-onpolicy · onpolicy-s1"
    assert run_name("lia-mtr-bridge-niah", ["results/lia_mtr/niah/lia_mtr_no_gate/model"]) == \
        "lia-mtr-bridge-niah · lia_mtr_no_gate"
    assert run_name("report", []) == "report"


def test_a_logged_model_holds_its_files_and_names_the_models_it_was_made_from(store, tmp_path):
    """Issue #63: the model page has the weights as artifacts (hard links into mlruns/: no second copy, and a
    later run's replacement leaves them as they were) and the logged models it was made from."""
    from mlflow.utils.file_utils import local_file_uri_to_path

    _stage_writing_a_model("convert", "results/a/model")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.txt").write_text("rows")
    _stage_writing_a_model("align", "results/b/model", inputs=["results/a/model", "data"])
    client = tracking._client(store)
    experiment = client.get_experiment_by_name(store.experiment).experiment_id
    models = {m.tags["relin.path"]: m for m in client.search_logged_models([experiment])}
    parent, child = models["results/a/model"], models["results/b/model"]
    assert child.tags["relin.parent_models"] == f"convert ({parent.model_id})", "a dataset is no parent"
    assert "relin.parent_models" not in parent.tags
    folder = Path(local_file_uri_to_path(child.artifact_location))
    weights = folder / "model.safetensors"
    assert weights.read_text() == "weights of results/b/model"
    assert os.path.samefile(weights, "results/b/model/model.safetensors"), "a hard link, not a copy"
    tmp = Path("results/b/.model.tmp")
    tmp.mkdir()
    (tmp / "model.safetensors").write_text("a later run's weights")
    os.replace("results/b/model/model.safetensors", tmp / "old")     # what an atomic rewrite does
    os.replace(tmp / "model.safetensors", "results/b/model/model.safetensors")
    assert weights.read_text() == "weights of results/b/model"


def test_a_stage_whose_pipeline_service_died_writes_the_rest_of_its_run_itself(store, service, tmp_path):
    """The pipeline killed outright takes its tracking service with it; its job, being stopped, still closes its
    run (KILLED, its metrics in) from its own process, instead of leaving it RUNNING."""
    from relin.tracking.stage_runs import Tracker

    tracker = Tracker(store, "probe", tracking._process_tags())
    assert tracker._outbox._service is not None
    service.close()
    tracker.log_metrics({"loss": 1.0}, step=1)
    tracker.close("KILLED")
    client = tracking._client(store)
    assert client.get_run(tracker.run_id).info.status == "KILLED"
    assert [m.step for m in client.get_metric_history(tracker.run_id, "loss")] == [1]


@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_tracking_store_that_does_not_exist_is_one_line_unless_the_config_creates_it(tmp_path, where):
    path = tmp_path / ("mlflow.db" if where == "file" else "missing/mlflow.db")
    with pytest.raises(tracking.TrackingUnavailable) as err:
        tracking.check_store(TrackingConfig(tracking_uri=f"sqlite:///{path}"))
    message = str(err.value)
    assert "\n" not in message and f"no MLflow store at {path} (no such {where})" in message
    assert "tracking.create_store: true" in message and not path.exists()
    tracking.check_store(TrackingConfig(tracking_uri=f"sqlite:///{path}", create_store=True))
    tracking.check_store(TrackingConfig())          # the project's own store is created on first use
