"""lm-evaluation-harness on any causal LM relin loads (teachers, hybrids): its Hugging Face model class
(``HFLM``) wraps the model object and tokenizer, so loglikelihood tasks run through the model's forward and
generation tasks through its ``generate`` (the hybrid's recurrent cache included).

Tasks come from the harness's registry or from YAML files under ``include_path`` (a local dataset: the
default and CI configs have no network). No ``trust_remote_code``; the model is never reloaded by id.
"""
from __future__ import annotations

from typing import Any


def harness_lm(model, tokenizer, batch_size: int, max_length: int):
    """``HFLM`` around a loaded model (on its device) and tokenizer; ``max_length`` 0: the model's positions."""
    from lm_eval.models.huggingface import HFLM

    from ..devices import model_device

    device = model_device(model)
    length = max_length or getattr(model.config, "max_position_embeddings", 2048)
    return HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, max_length=length, device=str(device))


def run_tasks(lm, tasks: list[str], include_path: str = "", num_fewshot: int = -1, limit: int = 0,
              log_samples: bool = False) -> dict[str, Any]:
    """``simple_evaluate`` of ``tasks``: ``{"results": {task: {metric: value}}, "n_samples": {task: n},
    "num_fewshot": {task: k}}`` (and ``"samples"`` with ``log_samples``). Deterministic: fixed seeds, no
    bootstrap."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    from ..errors import InputError

    manager = TaskManager(include_path=include_path or None)
    if unknown := [t for t in tasks if t not in manager.all_tasks]:
        where = f" or under {include_path}" if include_path else ""
        raise InputError(f"lm-eval tasks {unknown}: not in lm-evaluation-harness's registry{where}")
    out = simple_evaluate(model=lm, tasks=list(tasks), num_fewshot=None if num_fewshot < 0 else num_fewshot,
                          limit=limit or None, task_manager=manager, log_samples=log_samples, bootstrap_iters=0,
                          random_seed=0, numpy_random_seed=0, torch_random_seed=0, fewshot_random_seed=0)
    results = {task: {metric.split(",")[0]: value for metric, value in scores.items()
                      if isinstance(value, (int, float)) and metric != "alias"}
               for task, scores in out["results"].items()}
    summary = {"results": results,
               "n_samples": {task: n.get("effective", n.get("original")) for task, n in out["n-samples"].items()},
               "num_fewshot": dict(out.get("n-shot", {}))}
    if log_samples:
        summary["samples"] = out["samples"]
    return summary
