"""On-policy batches (OPAL stage 3): the student continues prompts with its own samples through its
recurrent cache, and each batch holds prompt + continuation with the continuation as the targets.

Each step draws ``batch_size`` prompts (the prompt part of dataset rows, by task weight; a filler row
gives a prefix to continue), samples up to ``horizon`` tokens per prompt from the current student
(temperature and top-p as configured, stopping at eos) and returns the rows right-padded with
``labels`` on the sampled tokens only. Prompts and sampling are seeded by ``(seed, step, rank)``, so a
resumed run rolls out what an uninterrupted one would. With ``logprobs`` (stage 3, where the sampler is the
model being trained) the rows also carry ``sampled_logprobs``: the log-prob the sampler drew each token with
(on the decode path), at the token's position, 0 elsewhere; the ``onpolicy`` objective logs its gap to the
training forward's (:mod:`relin.models.logprob_gap`). The horizon follows a
:class:`~relin.train.curriculum.HorizonCurriculum` fed by each step's KL (:meth:`observe`).

On a CUDA device a relin hybrid whose mixers all have a static decode path samples through a
:class:`~relin.models.static_sampler.StaticSampler` (a cache sized for the longest prompt and the largest
horizon, allocated once, the decode step replayed from a CUDA graph); any other model, or a CPU, through
:func:`~relin.models.generation.sample`.
"""
from __future__ import annotations

from functools import partial

import numpy as np
import torch

from ..artifacts import IGNORE_INDEX
from ..devices import model_device
from ..errors import ConfigError
from .curriculum import HorizonCurriculum


class OnPolicyRollouts:
    """Args:
        model: the student being trained (sampled in eval mode, without gradients).
        prompts (dict[str, list[list[int]]]): task -> prompt token ids (bos first).
        task_weights (dict[str, float]): share of the prompts per task.
        batch_size (int): prompts per micro-batch.
        curriculum (HorizonCurriculum): the horizon in tokens.
        eos_id, pad_id (int): end of sequence; padding.
        temperature, top_p (float): sampling.
        seed, rank, world_size (int): RNG stream and this process's share.
        logprobs (bool): the batches also carry ``sampled_logprobs`` (see the module docstring). Default: False.
    """

    def __init__(self, model, prompts: dict[str, list[list[int]]], task_weights: dict[str, float], batch_size: int,
                 curriculum: HorizonCurriculum, eos_id: int, pad_id: int, temperature: float = 1.0,
                 top_p: float = 1.0, seed: int = 0, rank: int = 0, world_size: int = 1, logprobs: bool = False):
        tasks = [t for t, w in task_weights.items() if w > 0]
        missing = [t for t in tasks if not prompts.get(t)]
        if missing:
            raise ConfigError(f"opal.onpolicy.prompt_tasks: no prompts of task(s) {', '.join(missing)} in the data")
        self.model, self.prompts, self.tasks = model, prompts, tasks
        weights = np.array([task_weights[t] for t in tasks], dtype=np.float64)
        self.task_probs = weights / weights.sum()
        self.batch_size, self.curriculum = batch_size, curriculum
        self.eos_id, self.pad_id, self.temperature, self.top_p = eos_id, pad_id, temperature, top_p
        self.seed, self.rank, self.world_size, self.logprobs = seed, rank, world_size, logprobs
        self.generated_tokens = 0
        self.horizons: list[int] = []
        self._lengths: dict[int, list[int]] = {}  # step -> tokens of each of its rollouts (eos included)
        self.longest_prompt = max(len(p) for rows in self.prompts.values() for p in rows)
        self._static = None

    def max_len(self, step: int) -> int:
        return self.longest_prompt + self.curriculum.horizon

    def _sampler(self, device: torch.device):
        """The static, graphed sampler where it applies (see the module docstring), else :func:`sample`."""
        from ..models.generation import sample
        from ..models.hybrid import HybridForCausalLM
        from ..models.hybrid.cache import STATIC_MIXERS
        from ..models.static_sampler import StaticSampler

        model = getattr(self.model, "module", self.model)
        if (device.type != "cuda" or not isinstance(model, HybridForCausalLM)
                or not set(model.config.mixer_types) <= set(STATIC_MIXERS)):
            return partial(sample, self.model)
        if self._static is None:
            self._static = StaticSampler(model, self.batch_size, self.longest_prompt + self.curriculum.maximum)
        return self._static.sample

    def _prompts(self, rng: np.random.Generator) -> list[list[int]]:
        picked = []
        for task in rng.choice(self.tasks, size=self.batch_size, p=self.task_probs):
            rows = self.prompts[task]
            picked.append(rows[int(rng.integers(len(rows)))])
        return picked

    @torch.no_grad()
    def micro_batches(self, step: int, count: int) -> list[dict[str, torch.Tensor]]:
        device = model_device(self.model)
        sample = self._sampler(device)
        was_training = self.model.training
        self.model.eval()
        batches = []
        for micro in range(count):
            stream = [self.seed, step, self.rank, micro]
            prompts = self._prompts(np.random.default_rng(stream))
            width = max(map(len, prompts))
            ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for row, prompt in enumerate(prompts):  # left-padded for sampling
                ids[row, width - len(prompt):] = torch.tensor(prompt)
                mask[row, width - len(prompt):] = 1
            generator = torch.Generator(device=device).manual_seed(int(np.random.default_rng(stream).integers(2**62)))
            out = sample(ids.to(device), self.curriculum.horizon, attention_mask=mask.to(device),
                         eos_token_id=self.eos_id, pad_token_id=self.pad_id, temperature=self.temperature,
                         top_p=self.top_p, generator=generator, return_logprobs=self.logprobs)
            new, logprobs = out if self.logprobs else (out, None)
            batches.append(self._batch(prompts, new.cpu(), None if logprobs is None else logprobs.cpu(),
                                       self._lengths.setdefault(step, [])))
        self.model.train(was_training)
        return batches

    def _batch(self, prompts: list[list[int]], new: torch.Tensor, logprobs: torch.Tensor | None = None,
               lengths: list[int] | None = None) -> dict[str, torch.Tensor]:
        """Right-padded ``prompt + continuation`` rows; labels on the continuation up to its eos; with
        ``logprobs [B, N]`` (the sampler's, per generated token) ``sampled_logprobs`` at the same positions. Each
        rollout's length (eos included) is appended to ``lengths``."""
        rows, labels = [], []
        for prompt, tokens in zip(prompts, new.tolist()):
            ends = [i for i, t in enumerate(tokens) if t == self.eos_id]
            tokens = tokens[:ends[0] + 1] if ends else tokens
            self.generated_tokens += len(tokens)
            if lengths is not None:
                lengths.append(len(tokens))
            rows.append(prompt + tokens)
            labels.append([IGNORE_INDEX] * len(prompt) + tokens)
        width = max(map(len, rows))
        batch = {"input_ids": torch.full((len(rows), width), self.pad_id, dtype=torch.long),
                 "labels": torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long),
                 "attention_mask": torch.zeros((len(rows), width), dtype=torch.long)}
        if logprobs is not None:
            batch["sampled_logprobs"] = torch.zeros((len(rows), width), dtype=torch.float32)
        for row, (prompt, ids, lab) in enumerate(zip(prompts, rows, labels)):
            batch["input_ids"][row, :len(ids)] = torch.tensor(ids)
            batch["labels"][row, :len(lab)] = torch.tensor(lab)
            batch["attention_mask"][row, :len(ids)] = 1
            if logprobs is not None:
                batch["sampled_logprobs"][row, len(prompt):len(ids)] = logprobs[row, :len(ids) - len(prompt)]
        return batch

    def observe(self, step: int, metrics: dict[str, float]) -> dict[str, float]:
        """Feed the step's per-token KL to the curriculum; returns what to log: the horizon the step rolled out to,
        and its rollouts' mean and longest length in tokens (``rollout_len_mean``, ``rollout_len_max``: a rollout
        stops at eos, so it may end before the horizon)."""
        horizon = self.curriculum.horizon
        self.horizons.append(horizon)
        self.curriculum.observe(step, metrics["kl"])
        lengths = self._lengths.pop(step, [])
        self._lengths = {s: v for s, v in self._lengths.items() if s > step}
        out = {"horizon": horizon}
        if lengths:
            out.update(rollout_len_mean=sum(lengths) / len(lengths), rollout_len_max=max(lengths))
        return out

    def budget(self) -> dict:
        """Tokens this rank sampled, and the horizon of every step (a control replays them)."""
        return {"rollout_tokens": self.generated_tokens, "horizons": list(self.horizons)}

    def state_dict(self) -> dict:
        return {"curriculum": self.curriculum.state_dict(), "generated_tokens": self.generated_tokens,
                "horizons": list(self.horizons)}

    def load_state_dict(self, state: dict) -> None:
        self.curriculum.load_state_dict(state["curriculum"])
        self.generated_tokens, self.horizons = state["generated_tokens"], list(state["horizons"])


def stage3_rollouts(sampler, prompts: dict[str, list[list[int]]], tokenizer, cfg, curriculum, env,
                    without: tuple[str, ...] = (), logprobs: bool = False) -> OnPolicyRollouts:
    """Rollouts of ``sampler`` on the prompts OPAL stage 3 draws (``cfg``: an ``OnPolicyConfig``: its prompt
    tasks, batch size, sampling and seed), the tasks in ``without`` left out. Stage 3 passes the student, its
    horizon curriculum and ``logprobs`` (its rollouts carry the sampler's log-probs, whose gap to the training
    forward it logs); the teacher-continuation control passes the teacher and stage 3's horizons, so both see
    the same prompts."""
    tasks = {task: 0.0 if task in without else weight for task, weight in cfg.prompt_tasks.items()}
    return OnPolicyRollouts(sampler, prompts, tasks, cfg.train.batch_size, curriculum,
                            eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id,
                            temperature=cfg.temperature, top_p=cfg.top_p, seed=cfg.train.seed,
                            rank=env.rank, world_size=env.world_size, logprobs=logprobs)
