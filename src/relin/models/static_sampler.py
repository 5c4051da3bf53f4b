"""Sampling from a relin hybrid through a static cache, its decode step replayed from a CUDA graph.

:class:`StaticSampler` decodes through a preallocated :class:`~relin.models.hybrid.StaticHybridCache` with the
decode step's forward captured once in a CUDA graph and replayed: no allocation and no kernel launch from Python
per token, and the host waits on the device only every ``sync_every`` tokens (to stop once every row has produced
eos). It draws tokens as :func:`~relin.models.generation.sample` does.
"""
from __future__ import annotations

import torch

from .generation import token_loop
from .hybrid.cache import StaticHybridCache


class StaticSampler:
    """:func:`~relin.models.generation.sample` for a relin hybrid through a
    :class:`~relin.models.hybrid.StaticHybridCache` of ``batch`` rows and ``max_length`` tokens (prompt +
    continuation), allocated once and reused.

    The prefill runs eagerly; each decode step's forward (one token per row) is captured in a CUDA
    graph at the first call on a CUDA device and replayed after (``graph=False``, or a CPU, runs it
    eagerly: the same arithmetic). The graph reads the parameters where they are, so in-place optimizer
    updates between calls are seen. Sampling stays outside the graph, with the caller's generator.
    """

    def __init__(self, model, batch: int, max_length: int, *, graph: bool | None = None, sync_every: int = 16):
        self.model, self.batch, self.max_length, self.sync_every = model, batch, max_length, sync_every
        self.cache = StaticHybridCache.allocate(model, batch, max_length)
        device = self.cache.length.device
        self.token = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.use_graph = device.type == "cuda" if graph is None else graph
        self.graph, self.logits = None, None

    def _forward(self) -> torch.Tensor:
        return self.model(input_ids=self.token, cache=self.cache, use_cache=True).logits[:, -1]

    def _capture(self) -> None:
        """Warm up (kernel autotuning, lazy allocations) on a side stream, then capture one step; the cache
        is emptied after each, so the capture's writes leave no trace."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._forward()
        torch.cuda.current_stream().wait_stream(stream)
        self.cache.reset()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.logits = self._forward()
        self.cache.reset()

    def _step(self, token: torch.Tensor) -> torch.Tensor:
        self.token.copy_(token[:, None])
        if self.graph is None:
            return self._forward()
        self.graph.replay()
        return self.logits

    @torch.no_grad()
    def sample(self, input_ids: torch.Tensor, max_new_tokens: int, *, attention_mask: torch.Tensor | None = None,
               eos_token_id: int | None = None, pad_token_id: int | None = None, temperature: float = 1.0,
               top_p: float = 1.0, generator: torch.Generator | None = None, return_logprobs: bool = False
               ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """As :func:`~.generation.sample`: left-padded prompts ``[batch, T]`` -> the generated tokens
        ``[batch, max_new_tokens]`` (and, with ``return_logprobs``, their log-probabilities)."""
        rows, width = input_ids.shape
        if rows != self.batch or width + max_new_tokens > self.max_length:
            raise ValueError(f"StaticSampler: expected {self.batch} rows of prompt + continuation <= "
                             f"{self.max_length} tokens, got {rows} rows of {width} + {max_new_tokens}")
        if self.use_graph and self.graph is None:
            self._capture()
        self.cache.reset()
        self.cache.pad_left(torch.ones_like(input_ids) if attention_mask is None else attention_mask)
        logits = self.model(input_ids=input_ids, cache=self.cache, use_cache=True, logits_to_keep=1).logits[:, -1]
        return token_loop(logits, self._step, max_new_tokens, eos_token_id, pad_token_id, temperature, top_p,
                         generator, self.sync_every, return_logprobs=return_logprobs)
