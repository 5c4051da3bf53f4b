"""The LIA-MTR bridge (seed 000, "Linear Multi-Timescale Retention as a Memory-Efficient Vision-Language
Bridge"), eqs. 1-5, on :func:`relin.kernels.multiscale_diag_retention`.

For visual tokens x_t ([B, N, d_vision]):

    q_t = W_q x_t,  k_t = ELU(W_k x_t) + 1,  v_t = W_v x_t                              (1)
    g_t = σ(W_g x^conv_t),  α_t = softmax(W_mix x^conv_t)                               (2)
    M_{t,s} = λ_s M_{t-1,s} + g_t ⊙ k_t ⊙ v_t,  s = 1..S                                (3)
    m_t = Σ_s α_{t,s} M_{t,s}                                                            (4)
    y_t = W_o (q_t ⊙ m_t)                                                                (5)

x^conv is a causal depthwise short convolution of x (identity-initialised). The S decays are fixed
(a buffer, no gradient), log-linear between ``decay_min`` and ``decay_max``. Options for what the paper
leaves open: ``gate`` (one scalar per token, or per channel; ``none`` is the ablation g ≡ 1), ``state``
(the C-vector of eq. 3, or a per-head K x V matrix, i.e. linear attention with S decays, under which
Lemma 2 holds; see notes/methods.md §7C.1), ``decay_spacing``, and ``normalize``: the paper motivates
ELU + 1 keys by "denominator collapse" but eqs. 3-5 have no denominator; with ``normalize`` (our reading)

    n_t = Σ_s α_{t,s} N_{t,s},  N_{t,s} = λ_s N_{t-1,s} + g_t ⊙ k_t,  y_t = W_o (q_t ⊙ m_t / (n_t + ε))

so m_t / n_t is a decayed, gated average of the values per channel. Shape legend: B batch, N patches,
C inner width, S scales, H heads, D head width.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..config.lia_mtr import MTRConfig
from .short_conv import ShortConvolution

# ε of the normalised reading: n_t ≥ g_t k_t > 0 (ELU + 1 keys), so it only guards a gate that underflows.
NORMALIZER_EPS = 1e-6


def decay_constants(num_scales: int, decay_min: float = 0.70, decay_max: float = 0.995,
                    spacing: str = "log_lambda") -> torch.Tensor:
    """The S fixed decays λ_s ([S], float64, ascending) between ``decay_min`` and ``decay_max``.

    ``log_lambda``: log λ_s evenly spaced (λ geometric), the paper's "log-linearly across [0.70, 0.995]";
    ``log_half_life``: log t_1/2 evenly spaced. Both have the paper's end points.
    """
    if num_scales == 1:
        return torch.tensor([decay_max], dtype=torch.float64)
    lo, hi = torch.tensor(decay_min, dtype=torch.float64), torch.tensor(decay_max, dtype=torch.float64)
    if spacing == "log_lambda":
        return torch.exp(torch.linspace(0, 1, num_scales, dtype=torch.float64) * (hi.log() - lo.log()) + lo.log())
    if spacing == "log_half_life":
        half = torch.exp(torch.linspace(half_lives(lo[None]).log().item(), half_lives(hi[None]).log().item(),
                                        num_scales, dtype=torch.float64))
        return torch.exp(math.log(0.5) / half)
    raise ValueError(f"decay_spacing: expected 'log_lambda' or 'log_half_life', got {spacing!r}")


def half_lives(decays: torch.Tensor) -> torch.Tensor:
    """t_1/2 = ln(1/2) / ln λ, in steps: the lag after which a write keeps half its weight."""
    return math.log(0.5) / decays.double().log()


class MTRBridge(nn.Module):
    """LIA-MTR, eqs. 1-5: ``forward(x [B, N, d_in]) -> y [B, N, d_out]``.

    Args:
        d_in (int): vision feature width.
        d_out (int): LLM embedding width.
        cfg (MTRConfig): the bridge's options (``lia_mtr.bridge.mtr``): inner width C of q, k, v (0 = d_in), S,
            the decay range and spacing, the write gate (``token``: g_t scalar; ``channel``: g_t in R^C), the state
            (``diagonal``, eq. 3, or ``head_matrix``), its heads, the short-convolution taps.
        backend (str): kernel backend, ``auto`` | ``triton`` | ``torch``. Default: ``auto``.
    """

    def __init__(self, d_in: int, d_out: int, cfg: MTRConfig | None = None, *, backend: str = "auto"):
        super().__init__()
        cfg = cfg or MTRConfig()
        width, num_scales, gate, state = cfg.width, cfg.num_scales, cfg.gate, cfg.state
        decay_min, decay_max, decay_spacing = cfg.decay_min, cfg.decay_max, cfg.decay_spacing
        num_heads, conv_size = cfg.num_heads, cfg.conv_size
        self.backend = backend
        if gate not in ("token", "channel", "none"):
            raise ValueError(f"gate: expected 'token', 'channel' or 'none', got {gate!r}")
        if cfg.normalize and state != "diagonal":
            raise ValueError("normalize: only with the diagonal state")
        if state not in ("diagonal", "head_matrix"):
            raise ValueError(f"state: expected 'diagonal' or 'head_matrix', got {state!r}")
        width = width or d_in
        if state == "head_matrix" and width % num_heads:
            raise ValueError(f"width {width}: expected a multiple of num_heads ({num_heads}) for the head_matrix state")
        self.width, self.state, self.num_heads, self.normalize = width, state, num_heads, cfg.normalize
        self.q_proj = nn.Linear(d_in, width, bias=False)
        self.k_proj = nn.Linear(d_in, width, bias=False)
        self.v_proj = nn.Linear(d_in, width, bias=False)
        self.conv = ShortConvolution(d_in, conv_size, activation="none")
        self.g_proj = None if gate == "none" else nn.Linear(d_in, 1 if gate == "token" else width)
        self.mix_proj = nn.Linear(d_in, num_scales)
        self.o_proj = nn.Linear(width, d_out, bias=False)
        self.register_buffer("log_decays", decay_constants(num_scales, decay_min, decay_max, decay_spacing).log()
                             .float(), persistent=True)

    def gates(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Eq. 2: the write gate ``g [B, N, 1 or C]`` (ones without a gate) and the scale mixer ``α [B, N, S]``.

        With the token gate the conv is folded into the projections (all linear, so exact up to rounding):
        ``W x^conv_t = Σ_j (W diag(w_j)) x_{t-K+1+j}`` with ``w_j [C]`` the conv's tap j, i.e. one
        ``[N, C] x [C, K(1+S)]`` matmul and K shifted adds, instead of a depthwise conv over the full
        ``[N, C]`` (which cost half the forward at N = 262,144, C = 1024 on the GPU).
        """
        if self.g_proj is not None and self.g_proj.out_features != 1:
            x_conv, _ = self.conv(x)
            return torch.sigmoid(self.g_proj(x_conv)), torch.softmax(self.mix_proj(x_conv), dim=-1)
        heads = [p for p in (self.g_proj, self.mix_proj) if p is not None]
        gated = len(heads) - 1                                # 1 with the token gate, 0 without one
        taps = self.conv.weight.shape[1]
        proj = torch.cat([p.weight for p in heads])                                         # [1 + S, C]
        folded = (proj[None] * self.conv.weight.t()[:, None]).reshape(-1, proj.shape[1])    # [K (1 + S), C]
        parts = (x @ folded.t().to(x.dtype)).unflatten(-1, (taps, proj.shape[0]))          # [B, N, K, 1 + S]
        acc = torch.promote_types(x.dtype, torch.float32)     # bf16 inputs sum their taps in fp32
        z = parts[:, :, taps - 1].to(acc)
        for j in range(taps - 1):      # tap j reads x_{t - (K - 1 - j)}: shifted right, zeros before the start
            shift = taps - 1 - j
            z[:, shift:] += parts[:, :-shift, j].to(acc)
        z = z + torch.cat([p.bias for p in heads]).to(acc)
        mix = torch.softmax(z[..., gated:], dim=-1).to(x.dtype)
        gate = torch.sigmoid(z[..., :1]).to(x.dtype) if gated else x.new_ones(*x.shape[:2], 1)
        return gate, mix

    def final_states(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The state after the last of ``x``'s N tokens and the largest injection (Theorem 2's quantities).

        Returns ``(norms [B, S], injection [B])``: per scale the norm of M_{N,s} (a C-vector for the diagonal
        state; the per-head K x V matrices, Frobenius, for ``head_matrix``) and max_t ||u_t|| (u_t = g_t ⊙ k_t ⊙ v_t;
        g_t k_t v_tᵀ per head), so that Theorem 2's bound reads ||M_{N,s}|| <= max ||u|| / (1 - λ_s).
        """
        from relin.kernels.decayed_linear_attn import chunk_decayed_linear_attn
        from relin.kernels.multiscale_retention import multiscale_diag_retention

        k, v = F.elu(self.k_proj(x)) + 1, self.v_proj(x)
        gate, mix = self.gates(x)
        B, N, C = k.shape
        if self.state == "diagonal":              # the mixer reads the states (eq. 4), it does not enter them
            _, state = multiscale_diag_retention(torch.ones_like(k), k, v, gate, mix, self.log_decays,
                                                 output_final_state=True, backend=self.backend)
            return state.float().norm(dim=-1), (gate * k * v).float().norm(dim=-1).amax(1)
        heads = (B, N, self.num_heads, C // self.num_heads)
        kg, vh = (k * gate).view(heads), v.view(heads)
        norms = []
        for log_decay in self.log_decays:
            g = torch.full((B, N, self.num_heads), float(log_decay), device=x.device)
            _, state = chunk_decayed_linear_attn(torch.ones_like(kg), kg, vh, g=g, output_final_state=True,
                                                 backend=self.backend)
            norms.append(state.float().flatten(1).norm(dim=1))
        injection = (kg.float().norm(dim=-1) * vh.float().norm(dim=-1)).norm(dim=-1)   # ||⊕_h k_h v_hᵀ||_F
        return torch.stack(norms, 1), injection.amax(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, N, d_in]`` -> ``y [B, N, d_out]`` (eqs. 1-5)."""
        from relin.kernels.decayed_linear_attn import chunk_decayed_linear_attn
        from relin.kernels.multiscale_retention import multiscale_diag_retention

        q, k, v = self.q_proj(x), F.elu(self.k_proj(x)) + 1, self.v_proj(x)
        gate, mix = self.gates(x)
        if self.state == "diagonal" and self.normalize:
            ones = torch.ones_like(q)
            m, _ = multiscale_diag_retention(ones, k, v, gate, mix, self.log_decays, backend=self.backend)
            n, _ = multiscale_diag_retention(ones, k, ones, gate, mix, self.log_decays, backend=self.backend)
            return self.o_proj(q * m / (n + NORMALIZER_EPS))
        if self.state == "diagonal":
            o, _ = multiscale_diag_retention(q, k, v, gate, mix, self.log_decays, backend=self.backend)
            # Without autograd nothing else holds q, k, v: freed here, the output projection's [B, N, d_out]
            # does not stack on them (the no-grad peak is then the kernel's inputs + o, not + y).
            del q, k, v, gate, mix
            return self.o_proj(o)
        B, N, C = q.shape
        heads = (B, N, self.num_heads, C // self.num_heads)
        q_h, k_h, v_h = q.view(heads), (k * gate).view(heads), v.view(heads)
        o = 0
        # One constant log-decay per scale; a per-head K x V state each, mixed by α_s (eq. 4).
        for s, log_decay in enumerate(self.log_decays):
            g = torch.full((B, N, self.num_heads), float(log_decay), device=x.device)
            o_s, _ = chunk_decayed_linear_attn(q_h, k_h, v_h, g=g, backend=self.backend)
            o = o + mix[..., s, None, None] * o_s
        return self.o_proj(o.reshape(B, N, C))
