"""What each outbox entry does in the MLflow store: :func:`apply`, the one place an entry (``create_run``,
``log_batch``, ``log_input``, ``log_artifact``, ``log_model``, ``terminate``) becomes MLflow calls, whether a stage
writes it, the pipeline's tracking service writes it for the stage, or a later pipeline replays it from
``logs/tracking-outbox/``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..io import _default_modes, file_stats
from .client import _experiment_id


def apply(client, op: dict[str, Any], run_id: str | None) -> str | None:
    """Carry out one outbox entry; returns the run id (set by ``create_run``)."""
    from mlflow.entities import Metric, Param, RunTag

    kind = op["op"]
    if kind == "create_run":
        run = client.create_run(_experiment_id(client, op["experiment"]), run_name=op["run_name"], tags=op["tags"])
        return run.info.run_id
    if run_id is None:
        raise RuntimeError(f"outbox entry {kind} has no run (its create_run was lost)")
    if kind == "log_batch":
        client.log_batch(run_id, metrics=[Metric(k, v, ts, step) for k, v, ts, step in op.get("metrics", [])],
                         params=[Param(k, v) for k, v in op.get("params", [])],
                         tags=[RunTag(k, v) for k, v in op.get("tags", [])])
    elif kind == "log_input":
        _log_input(client, op, run_id)
    elif kind == "log_artifact":
        path = Path(op["path"])
        if path.is_dir():
            client.log_artifacts(run_id, str(path), op.get("artifact_path"))
        elif path.is_file():
            client.log_artifact(run_id, str(path), op.get("artifact_path"))
        else:
            return run_id
        _umask_modes(client, run_id, op.get("artifact_path"))
    elif kind == "log_model":
        _log_model(client, op, run_id)
    elif kind == "terminate":
        client.set_terminated(run_id, status=op["status"])
    else:
        raise ValueError(f"unknown outbox entry {kind!r}")
    return run_id


def _written_once(write) -> None:
    """``write()``; a row it finds already there (a retried write whose first attempt landed, or another stage's
    insert of the same dataset row at the same moment: a second attempt links that row) is no error."""
    try:
        write()
    except Exception as err:  # noqa: BLE001 - only a unique-key conflict is tolerated
        if "UNIQUE constraint failed: datasets" in str(err):
            write()
        elif "UNIQUE constraint failed: inputs" not in str(err):
            raise


def _log_input(client, op: dict[str, Any], run_id: str) -> None:
    """A model another stage logged is a model input of the run (the UI's lineage model -> run -> model); any
    other input is a dataset with its digest and producing run."""
    from mlflow.entities import LoggedModelInput

    if op.get("model") and (model_id := _producer_model(client, op, run_id)):
        _written_once(lambda: client.log_inputs(run_id, models=[LoggedModelInput(model_id)]))
    else:
        _written_once(lambda: client.log_inputs(run_id, datasets=[_dataset_input(op)]))


def _producer_model(client, op: dict[str, Any], run_id: str) -> str | None:
    """The id of the logged model a stage read: the one its manifest names, else (a producer whose writes reached
    the store later, from its outbox) the newest with the input's content digest, the producing run's first."""
    from mlflow.exceptions import MlflowException

    if op.get("model_id"):
        try:
            return client.get_logged_model(op["model_id"]).model_id
        except MlflowException:
            pass  # an id of another store (one moved aside and started anew)
    experiment_id = client.get_run(run_id).info.experiment_id
    found = client.search_logged_models([experiment_id], filter_string=f"tags.`relin.digest` = '{op['digest']}'",
                                        order_by=[{"field_name": "creation_time", "ascending": False}])
    producers = [m for m in found if m.source_run_id == op.get("producer_run_id")]
    return (producers or found)[0].model_id if found else None


def _umask_modes(client, run_id: str, artifact_path: str | None) -> None:
    """The folder an artifact was logged into takes the umask's modes like every output: MLflow's copy keeps the
    source's, and a file some library wrote 0600 would be the one artifact other users cannot read."""
    from mlflow.utils.file_utils import local_file_uri_to_path

    uri = client.get_run(run_id).info.artifact_uri
    if "://" in uri and not uri.startswith("file:"):
        return  # a remote store keeps its own modes
    _default_modes(Path(local_file_uri_to_path(uri), artifact_path or ""))


def _log_model(client, op: dict[str, Any], run_id: str) -> None:
    """A ``LoggedModel`` of run ``run_id``: created once (its id kept in ``op``, so a retried or replayed entry
    makes no second one) with the logged models it was made from named in its tags, its files as its artifacts, an
    output of the run, its metrics linked, finalised READY."""
    from mlflow.entities import LoggedModelOutput, Metric

    if not op.get("model_id"):
        experiment_id = client.get_run(run_id).info.experiment_id
        tags = {**op["tags"], **_parents_tag(client, op.get("parents", []), run_id)}
        op["model_id"] = client.create_logged_model(experiment_id, name=op["name"], source_run_id=run_id,
                                                    tags=tags, params=op["params"],
                                                    model_type=op["model_type"]).model_id
    model_id = op["model_id"]
    _model_files(client, model_id, op)
    _written_once(lambda: client.log_outputs(run_id, [LoggedModelOutput(model_id, op.get("step", 0))]))
    dataset = op.get("dataset") or {}
    metrics = [Metric(k, v, op["timestamp"], op.get("step", 0), model_id=model_id, run_id=run_id,
                      dataset_name=dataset.get("name"), dataset_digest=dataset.get("digest"))
               for k, v in op["metrics"].items()]
    if metrics:
        client.log_batch(run_id, metrics=metrics)
    client.finalize_logged_model(model_id, "READY")


def _parents_tag(client, parents: list[dict[str, Any]], run_id: str) -> dict[str, str]:
    """``relin.parent_models``: the logged models among the run's inputs (the model a stage starts from, a
    teacher it distils), ``name (id)`` each, for the model's page."""
    named = []
    for parent in parents:
        if model_id := _producer_model(client, parent, run_id):
            named.append(f"{client.get_logged_model(model_id).name} ({model_id})")
    return {"relin.parent_models": ", ".join(named)} if named else {}


def _model_files(client, model_id: str, op: dict[str, Any]) -> None:
    """The model folder's files as the logged model's artifacts: hard links in a local artifact store (no second
    copy of the weights, and a later run's replacement leaves them as they were), an upload elsewhere. Skipped when
    the folder changed since the stage logged it (a replayed entry): those would be another run's weights."""
    import shutil

    from mlflow.utils.file_utils import local_file_uri_to_path

    source = Path(op["tags"]["relin.path"])
    if not op.get("files") or not source.is_dir() or file_stats(source) != op["files"]:
        return
    location = client.get_logged_model(model_id).artifact_location
    if "://" in location and not location.startswith("file:"):
        client.log_model_artifacts(model_id, str(source))
        return
    root = Path(local_file_uri_to_path(location))
    for name in op["files"]:
        target = root / name
        if target.exists():
            continue                # a retried entry
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source / name, target)
        except OSError:             # another filesystem, or no hard links there
            shutil.copy2(source / name, target)


def _dataset_input(op: dict[str, Any]):
    import warnings

    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.entities import DatasetInput, InputTag

    with warnings.catch_warnings():  # "source can be interpreted in multiple ways": harmless
        warnings.simplefilter("ignore")
        source = resolve_dataset_source(op["source"])
    dataset = MetaDataset(source=source, name=op["name"], digest=op["digest"])
    tags = [InputTag("mlflow.data.context", "input")]
    if op.get("producer_run_id"):
        tags += [InputTag("relin.producer_run_id", op["producer_run_id"]),
                 InputTag("relin.producer_stage", op.get("producer_stage", ""))]
    return DatasetInput(dataset._to_mlflow_entity(), tags)
