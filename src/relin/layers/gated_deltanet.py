"""Gated DeltaNet (Yang, Kautz, Hatamizadeh, ICLR 2025), the linear layer OPAL puts in place of
attention, on :func:`relin.kernels.chunk_gated_delta_rule`.

Per head, with q and k L2-normalised in the kernel and scale 1/√K:

    S_t = exp(g_t) (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ,   o_t = scale · S_tᵀ q_t
    g_t = −exp(A_log) · softplus(a_t + dt_bias),   β_t = σ(b_t)  (× 2 with negative eigenvalues)

then ``o_proj(GatedRMSNorm(o_t, g_proj(x)))``. q, k and v pass a short causal convolution first;
with ``qk_norm``, q and k also pass the teacher's per-head RMSNorm (RADLADS' ``use_qk_rmsnorm``; off by
default, as in Qwen3-Next and Qwen3.5, whose layout :mod:`relin.models.export` writes).
Every head has its own q, k and v (a teacher's grouped k/v heads are expanded at conversion), so
projections keep the teacher's names and shapes ``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``.
Padding positions write nothing (β = 0, g = 0, inputs zeroed).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..config.opal import GDNConfig
from .norms import GatedRMSNorm, RMSNorm
from .short_conv import ShortConvolution
from .stacked_linear import stacked_projection, stacked_weight

# The projections a decode step runs as one GEMM, in the order of its output's columns.
IN_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "g_proj", "a_proj", "b_proj")
CONVOLUTIONS = ("q_conv", "k_conv", "v_conv")


@dataclass
class DeltaNetState:
    """A layer's decoding state: the conv inputs ``[B, C, K-1]`` of q, k, v and ``S [B, H, K, V]``."""

    conv_q: torch.Tensor
    conv_k: torch.Tensor
    conv_v: torch.Tensor
    recurrent: torch.Tensor

    def nbytes(self) -> int:
        return sum(t.nbytes for t in (self.conv_q, self.conv_k, self.conv_v, self.recurrent))

    def update(self, conv_q: torch.Tensor, conv_k: torch.Tensor, conv_v: torch.Tensor,
               recurrent: torch.Tensor) -> DeltaNetState:
        """The state after a forward (same shapes as the fields): a new object for the dynamic cache."""
        return DeltaNetState(conv_q, conv_k, conv_v, recurrent)


class StaticDeltaNetState(DeltaNetState):
    """A :class:`DeltaNetState` whose preallocated tensors are overwritten in place by :meth:`update`
    (fixed addresses, so a decode step can be captured in a CUDA graph). ``conv_q``, ``conv_k`` and ``conv_v``
    are views of one buffer ``conv_qkv [B, 3·H·K, W-1]``, which a decode step shifts in one kernel."""

    def __init__(self, conv_qkv: torch.Tensor, recurrent: torch.Tensor):
        super().__init__(*conv_qkv.chunk(3, dim=1), recurrent)
        self.conv_qkv = conv_qkv

    def nbytes(self) -> int:
        return self.conv_qkv.nbytes + self.recurrent.nbytes

    def update(self, conv_q: torch.Tensor, conv_k: torch.Tensor, conv_v: torch.Tensor,
               recurrent: torch.Tensor) -> StaticDeltaNetState:
        for mine, new in zip((self.conv_q, self.conv_k, self.conv_v, self.recurrent),
                             (conv_q, conv_k, conv_v, recurrent)):
            if new is not mine:
                mine.copy_(new)
        return self


class GatedDeltaNet(nn.Module):
    """Args:
        width (int): model width C.
        num_heads (int): H (q, k and v heads alike).
        head_dim (int): K = V per head.
        cfg (GDNConfig): the layer's options: short-convolution taps, its activation (``silu``: fla,
            Qwen3-Next), the per-head q/k RMSNorm before the kernel's L2 norm, β in (0, 2) (negative eigenvalues).
        eps (float): the norms' epsilon. Default: 1e-6.
        backend (str): kernel backend, ``auto`` | ``triton`` | ``torch``. Default: ``auto``.
    """

    def __init__(self, width: int, num_heads: int, head_dim: int, cfg: GDNConfig | None = None, *, eps: float = 1e-6,
                 backend: str = "auto"):
        super().__init__()
        cfg = cfg or GDNConfig()
        conv_size, conv_activation, qk_norm = cfg.conv_size, cfg.conv_activation, cfg.qk_norm
        self.num_heads, self.head_dim = num_heads, head_dim
        self.allow_neg_eigval, self.backend = cfg.allow_neg_eigval, backend
        inner = num_heads * head_dim
        self.q_proj = nn.Linear(width, inner, bias=False)
        self.k_proj = nn.Linear(width, inner, bias=False)
        self.v_proj = nn.Linear(width, inner, bias=False)
        self.o_proj = nn.Linear(inner, width, bias=False)
        self.q_norm = RMSNorm(head_dim, eps) if qk_norm else nn.Identity()
        self.k_norm = RMSNorm(head_dim, eps) if qk_norm else nn.Identity()
        self.q_conv = ShortConvolution(inner, conv_size, conv_activation)
        self.k_conv = ShortConvolution(inner, conv_size, conv_activation)
        self.v_conv = ShortConvolution(inner, conv_size, conv_activation)
        self.a_proj = nn.Linear(width, num_heads, bias=False)
        self.b_proj = nn.Linear(width, num_heads, bias=False)
        self.g_proj = nn.Linear(width, inner, bias=False)
        self.o_norm = GatedRMSNorm(head_dim, eps)
        self.A_log = nn.Parameter(torch.empty(num_heads))
        self.dt_bias = nn.Parameter(torch.empty(num_heads))
        self.reset_decay()

    @torch.no_grad()
    def reset_decay(self, generator: torch.Generator | None = None) -> None:
        """fla's and Qwen3-Next's decay init: A ~ U(0, 16) (``A_log = log A``), dt log-uniform in [1e-3, 0.1] with
        ``dt_bias = softplus⁻¹(dt)``."""
        self.A_log.copy_(torch.empty(self.num_heads).uniform_(0, 16, generator=generator).log())
        dt = torch.exp(torch.empty(self.num_heads).uniform_(math.log(1e-3), math.log(0.1), generator=generator))
        self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))

    def forward(self, hidden_states: torch.Tensor, padding: torch.Tensor | None = None,
                state: DeltaNetState | None = None, use_cache: bool = False
                ) -> tuple[torch.Tensor, DeltaNetState | None]:
        """``hidden_states [B, T, C]``, ``padding [B, T]`` (1 = real token). Returns ``[B, T, C]`` and
        the state after the last token (when ``use_cache``)."""
        from relin.kernels.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule

        batch, steps, _ = hidden_states.shape
        real = (hidden_states.new_ones(batch, steps) if padding is None
                else padding[:, -steps:].to(hidden_states.dtype))
        if steps == 1 and isinstance(state, StaticDeltaNetState) and not torch.is_grad_enabled():
            return self.decode_step(hidden_states, real, state)
        x = hidden_states * real[..., None]
        q, conv_q = self.q_conv(self.q_proj(x), None if state is None else state.conv_q)
        k, conv_k = self.k_conv(self.k_proj(x), None if state is None else state.conv_k)
        v, conv_v = self.v_conv(self.v_proj(x), None if state is None else state.conv_v)
        heads = (batch, steps, self.num_heads, self.head_dim)
        q, k, v = self.q_norm(q.view(heads)), self.k_norm(k.view(heads)), v.view(heads)
        beta = torch.sigmoid(self.b_proj(x).float()) * (2.0 if self.allow_neg_eigval else 1.0) * real[..., None]
        g = -self.A_log.float().exp() * F.softplus(self.a_proj(x).float() + self.dt_bias.float()) * real[..., None]
        initial = None if state is None else state.recurrent
        decoding = steps == 1 and initial is not None and not torch.is_grad_enabled()
        if decoding:  # a dynamic state's step (a static one's goes through decode_step)
            o, final = fused_recurrent_gated_delta_rule(
                q, k, v, g, beta, initial_state=initial, output_final_state=use_cache, use_qk_l2norm_in_kernel=True,
                backend=self.backend)
        else:
            o, final = chunk_gated_delta_rule(q, k, v, g, beta, initial_state=initial, output_final_state=use_cache,
                                              use_qk_l2norm_in_kernel=True, backend=self.backend)
        o = self.o_norm(o, self.g_proj(x).view(heads)).reshape(batch, steps, -1)
        new_state = None
        if use_cache:
            new_state = (DeltaNetState(conv_q, conv_k, conv_v, final) if state is None
                         else state.update(conv_q, conv_k, conv_v, final))
        return self.o_proj(o), new_state

    def decode_step(self, hidden_states: torch.Tensor, real: torch.Tensor, state: StaticDeltaNetState
                    ) -> tuple[torch.Tensor, StaticDeltaNetState]:
        """One token through a static state, the same math as :meth:`forward` in six launches: one GEMM for the
        six input projections (frozen weights; one each when they train), the three short convolutions as one step
        (:func:`relin.kernels.short_conv_step`, state shifted in place), the gates (:func:`relin.kernels.gdn_gates`),
        the recurrent step (state overwritten in place), the gated norm (:func:`relin.kernels.fused_norm`) and
        ``o_proj``. ``hidden_states [B, 1, C]``, ``real [B, 1]``."""
        from relin.kernels.gated_delta_rule import fused_recurrent_gated_delta_rule, gdn_gates
        from relin.kernels.short_conv import short_conv_step

        batch, inner, heads = hidden_states.shape[0], self.num_heads * self.head_dim, self.num_heads
        shape = (batch, 1, self.num_heads, self.head_dim)
        proj = stacked_projection(self, IN_PROJECTIONS, hidden_states[:, 0])       # [B, 4·inner + 2·H]
        qkv = short_conv_step(proj[:, :3 * inner], state.conv_qkv, stacked_weight(self, CONVOLUTIONS),
                              self.q_conv.activation, real[:, 0], backend=self.backend)
        q, k, v = (qkv[:, i * inner:(i + 1) * inner].view(shape) for i in range(3))
        q, k = self.q_norm(q), self.k_norm(k)
        a = proj[:, 4 * inner:4 * inner + heads].view(batch, 1, heads)
        b = proj[:, 4 * inner + heads:].view(batch, 1, heads)
        g, beta = gdn_gates(a, b, self.A_log, self.dt_bias, 2.0 if self.allow_neg_eigval else 1.0, real,
                            backend=self.backend)
        o, _ = fused_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=state.recurrent,
                                                output_final_state=True, use_qk_l2norm_in_kernel=True,
                                                final_state_in_place=True, backend=self.backend)
        gate = proj[:, 3 * inner:4 * inner].view(shape)
        o = self.o_norm(o, gate).reshape(batch, 1, inner)
        return self.o_proj(o), state
