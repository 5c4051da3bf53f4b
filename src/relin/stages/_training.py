"""The body every training stage shares: inputs, the student (and any teacher) built by the stage,
the batch source and objective, the one loop with checkpoints keyed by the run's identity, the
outputs, and the MLflow run around all of it.

A training stage module keeps only what is its own, usually a ``setup`` function of ~15 lines::

    def run(args, sections):
        cfg = sections.get("teacher.train")

        def setup(env):
            data = TextData.load(args.data)
            model = build_teacher(sections.get(...), data.tokenizer, seed=cfg.seed)
            return Setup(model, data.tokenizer, build_objective("ce"), data.step_batches(cfg, env))

        run_training("teacher-lm", __name__, args, sections, cfg, setup, inputs=[args.data])

Outputs (rank 0, each written atomically): the model directory (``save_pretrained``, safetensors,
plus the tokenizer), ``history.csv`` (one row per logged step, no timing columns) and
``train_metrics.json`` (steps, final loss, the objective's final sums and the run's exact budget:
optimizer steps, forward and target tokens, per step too). Wall time and the step a
run resumed from go to MLflow and to the outputs' manifests.
"""
from __future__ import annotations

import argparse
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..artifacts import HISTORY_COLUMNS, TIMING_COLUMNS
from ..errors import InputError

if TYPE_CHECKING:
    import numpy as np
    import torch

    from ..data.token_rows import TokenRows
    from ..ranks import DistEnv
    from ..train.loop import BatchSource
    from ..train.objectives import Objective

# History columns that describe the loop rather than the objective (not repeated in train_metrics.json).
LOOP_COLUMNS = ("step", "loss", "lr", "grad_norm", "max_len")


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="model directory to write (save_pretrained)")
    parser.add_argument("--history", required=True, help="per-step training history CSV to write")
    parser.add_argument("--metrics", required=True, help="final training metrics JSON to write")
    parser.add_argument("--checkpoints", required=True, help="checkpoint root (a killed run resumes from it)")


def add_distillation_arguments(parser: argparse.ArgumentParser, student: str) -> None:
    """``--teacher``, ``--student`` (described by ``student``), ``--data`` and the outputs."""
    parser.add_argument("--teacher", required=True, help="teacher model directory (frozen)")
    parser.add_argument("--student", required=True, help=student)
    parser.add_argument("--data", required=True, help="synth-text dataset directory")
    add_output_arguments(parser)


@dataclass
class TextData:
    """The training split of a ``synth_text``-style dataset or a ``text-corpus`` one, and the tokenizer beside it.

    Token rows stay in the memory-mapped Arrow files (:class:`~relin.data.token_rows.TokenRows`). A corpus
    has no ``labels`` column (every token is a target: the labels are the ids) and no ``prompt_len``.
    """

    path: Path
    tasks: list[str]
    input_ids: "TokenRows"
    labels: "TokenRows"
    prompt_len: "np.ndarray"
    tokenizer: Any

    @classmethod
    def load(cls, path: str | Path) -> "TextData":
        import numpy as np

        from ..data.loaders import load_split
        from ..data.token_rows import TokenRows
        from ..data.tokenizer import load_tokenizer

        path = Path(path)
        train = load_split(path, "train", ("task", "input_ids"))
        if train._indices is not None:
            train = train.flatten_indices()
        table = train.data
        input_ids = TokenRows.from_arrow(table.column("input_ids"))
        labels = TokenRows.from_arrow(table.column("labels")) if "labels" in train.column_names else input_ids
        prompt_len = (np.asarray(table.column("prompt_len").to_numpy(), dtype=np.int64)
                      if "prompt_len" in train.column_names else np.zeros(len(train), dtype=np.int64))
        return cls(path, table.column("task").to_pylist(), input_ids, labels, prompt_len,
                   load_tokenizer(path / "tokenizer"))

    def prompts(self) -> dict[str, list[list[int]]]:
        """Per task, the prompts of its rows (up to the answer); a filler passage or a corpus row (no prompt)
        gives its first half."""
        out: dict[str, list[list[int]]] = {}
        for i, task in enumerate(self.tasks):
            ids, prompt_len = self.input_ids[i], int(self.prompt_len[i])
            # a passage (filler, real text, a corpus row) is supervised from its first token: no prompt of its own
            cut = max(2, ids.size // 2) if prompt_len <= 1 else prompt_len
            out.setdefault(task, []).append(ids[:cut].tolist())
        return out

    def model(self, reference: str, load=None):
        """The causal LM at ``reference``, refused with one line unless it was saved with this data's tokenizer.
        ``load``: :func:`~relin.models.teachers.load_pretrained` by default; a stage that may meet a relin hybrid
        passes :func:`~relin.models.saved.load_saved` (and so depends on the hybrid's code)."""
        from ..data.tokenizer import check_same_tokenizer
        from ..models.teachers import load_pretrained

        check_same_tokenizer(self.tokenizer, self.path, reference)
        return (load or load_pretrained)(reference)

    def check_fits(self, max_positions: int, key: str) -> None:
        longest = int(self.input_ids.lengths.max())
        if longest > max_positions:
            raise InputError(f"data {self.path}: rows of {longest} tokens exceed {key}={max_positions}")

    def step_batches(self, cfg, env: "DistEnv", without: tuple[str, ...] = ()):
        """:class:`~relin.train.batching.StepBatches` over these rows as ``cfg`` (a TrainConfig) asks, the
        tasks in ``without`` left out whatever their weight."""
        from ..train.batching import StepBatches

        present = set(self.tasks)
        weights = {**cfg.task_weights, **{task: 0.0 for task in without if task in present}}
        return StepBatches(self.input_ids, self.labels, batch_size=cfg.batch_size,
                           pad_id=self.tokenizer.pad_token_id, seed=cfg.seed, curriculum=cfg.curriculum,
                           tasks=self.tasks, task_weights=weights, bucket_by_length=cfg.bucket_by_length,
                           rank=env.rank, world_size=env.world_size)


def held_out(niah_protocol: str) -> tuple[str, ...]:
    """The tasks a distillation stage leaves out of its data: the NIAH families under ``zero_shot``."""
    from ..config.opal import NIAH_TASKS

    return NIAH_TASKS if niah_protocol == "zero_shot" else ()


@dataclass
class Setup:
    """What a stage's ``setup`` builds: the model to train (and save), its tokenizer, the objective
    (holding any frozen teacher) and the batch source."""

    model: "torch.nn.Module"
    tokenizer: Any
    objective: "Objective"
    batches: "BatchSource"


def history_columns(rows: list[dict]) -> list[str]:
    """Every non-timing key the history rows carry, in first-seen order."""
    keys = dict.fromkeys(key for row in rows for key in row if key not in TIMING_COLUMNS)
    return list(keys) or list(HISTORY_COLUMNS)


def write_model(out: str | Path, model, tokenizer) -> None:
    """``save_pretrained`` (fp32, safetensors) of the model and its tokenizer (or a vision tower's image processor;
    when it has one) into ``out``, atomically."""
    import torch

    from ..io import atomic_dir

    model = model.to("cpu", torch.float32)
    with atomic_dir(out) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)


def model_name(out: str | Path) -> str:
    """The name a model directory goes by in MLflow: its last folders under ``results/`` without the final
    ``model``, joined by ``-`` (``results/opal/onpolicy/model`` -> ``opal-onpolicy``); MLflow refuses ``/ : . %``
    and quotes in a name."""
    parts = [p for p in Path(out).parts if p not in ("results", "model", ".", "/")][-3:]
    name = "-".join(parts) or "model"
    return "".join("_" if c in "/:.%\"'" else c for c in name)


def log_model(tracker, out: str | Path, model, metrics: dict | None = None, dataset: str | Path | None = None,
              **params) -> None:
    """``out`` (the directory ``model`` was saved to) as a logged model of the stage's run."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None) or type(model).__name__
    tracker.log_model(out, model_name(out), model_type, metrics=metrics, dataset=dataset,
                      params={"class": type(model).__name__,
                              "num_parameters": sum(p.numel() for p in model.parameters()),
                              **({"mixer_types": ",".join(config.mixer_types)}
                                 if hasattr(config, "mixer_types") else {}), **params})


def write_outputs(args: argparse.Namespace, model, tokenizer, history: list[dict], summary: dict, tracker,
                  dataset: str | Path | None = None) -> None:
    """The model directory, ``history.csv`` and ``train_metrics.json`` (rank 0), each atomically; the model is
    logged to the stage's run with the summary's scalars (run metrics linked to the model)."""
    from ..io import atomic_write_csv, atomic_write_json

    write_model(args.out, model, tokenizer)
    columns = history_columns(history)
    atomic_write_csv(args.history, [{k: row.get(k) for k in columns} for row in history], columns)
    atomic_write_json(args.metrics, summary)
    scalars = {**summary, **{f"budget/{k}": v for k, v in summary.get("budget", {}).items()}}
    scalars = {k: v for k, v in scalars.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    log_model(tracker, args.out, model, metrics=scalars, dataset=dataset)


def run_training(stage: str, module: str, args: argparse.Namespace, sections, train_cfg,
                 setup: Callable[["DistEnv"], Setup], *, inputs: list[str | Path],
                 tags: dict[str, str] | None = None, finish: Callable[[Any, Any], dict | None] | None = None,
                 outputs: list[str | Path] = ()) -> None:
    """Build (``setup``), train and save one model inside the stage's MLflow run.

    ``module`` is the stage module's name: its code, with the config sections and the digests of
    ``inputs``, keys the checkpoints (:func:`~relin.train.checkpoint.run_identity`). ``finish(model,
    tracker)`` (rank 0) evaluates the trained model on its device before it is saved, writing ``outputs``; what it
    returns (a dict, or None) joins ``train_metrics.json``.
    """
    from ..pipeline.jobserver.job_lock import job_lock
    from ..tracking import stage_run
    from ..train.checkpoint import release, run_directory, run_identity, run_key
    from ..train.distributed import barrier, dist_env
    from ..train.loop import train

    env = dist_env()
    written = [args.out, args.history, args.metrics, *outputs] if env.is_main else []
    with stage_run(stage, sections.raw, inputs=inputs if env.is_main else [], outputs=written) as tracker:
        tracker.set_tags(tags or {})
        built = setup(env)
        tracker.log_params({"num_parameters": sum(p.numel() for p in built.model.parameters()),
                            "trainable_parameters": sum(p.numel() for p in built.model.parameters()
                                                        if p.requires_grad)})
        identity = run_identity(sections.raw, list(inputs), module)
        with contextlib.ExitStack() as held:
            if env.is_main:     # the checkpoint folder has one writer too (relin.pipeline.jobserver.job_lock)
                held.enter_context(job_lock(Path(args.checkpoints) / run_key(identity)))
            run_dir = run_directory(args.checkpoints, identity, env)
            result = train(built.model, built.objective, built.batches, train_cfg, checkpoint_root=run_dir,
                           tracker=tracker, env=env)
            tracker.record({"wall_s": round(result.wall_s, 2), "resumed_from": result.resumed_from})
            if env.is_main:
                measured = finish(result.model, tracker) if finish is not None else None
                last = result.history[-1] if result.history else {}
                summary = {"steps": result.steps, "final_loss": result.final_loss, "world_size": env.world_size,
                           "backend": train_cfg.backend,
                           **{f"final_{k}": v for k, v in last.items() if k not in (*LOOP_COLUMNS, *TIMING_COLUMNS)},
                           **(measured or {}), "budget": result.budget}
                write_outputs(args, result.model, built.tokenizer, result.history, summary, tracker,
                              dataset=getattr(args, "data", None))
            release(run_dir, env)
    barrier()
