"""The HedgeMamba block (seeds/001 §3.2, eqs. 7-10, Fig. 2): a Mamba-2-style block with a value projection
before the SSM and the Hedgehog feature map on B and C, on :func:`relin.kernels.chunk_decayed_linear_attn`.

Per head h (every head has its own B and C: Mamba-2's ``ngroups = H``, d_state = 2D, the feature width):

    [x, B, C] = act(conv([W_V u + b_V, W_K u + b_K, W_Q u + b_Q]))   depthwise causal conv over time
    Δ_t = softplus(W_Δ u_t + b_Δ),  Λ_t = exp(−e^{A_log} Δ_t)          scalar per head (Mamba-2)
    S_t = Λ_t S_{t−1} + w_t φ_B(B_t) x_tᵀ,  z_t = Λ_t z_{t−1} + w_t φ_B(B_t)     (eq. 10: V with a ones
    y_t = S_tᵀ φ_C(C_t) / (φ_C(C_t)·z_t) + D x_t                          column, Λ duplicated)
    out = W_O (y ⊙ SiLU(W_z u + b_z)) + b_O

with the write weight w_t = Δ_t / Δ̄, Δ̄ = softplus(b_Δ) the head's input-independent Δ. Mamba writes with
w_t = Δ_t (B̄ = Δ B); eq. 9's ratio divides any per-head constant out, so the two are the same block, but
dividing by Δ̄ keeps k's scale, and with it the kernel's 1e-6 in the denominator, independent of Δ̄: the
near-identity decay init puts Λ's smallness in a Δ̄ of ~2e-7.

Options (``norm``, ``feature_maps``, ``conv_bias``; arguments, else the block config's fields of those names):

- ``norm="ratio"``: eqs. 9-10 (above, the paper's); ``"none"``: eq. 8's un-normalised Y_φ, y_t = S_tᵀ φ_C(C_t)
  (the ablation of the normalisation; at w = 1, Λ = I it is Y_φ exactly); ``"gated_rms"``: Mamba-2's output
  norm, y ← RMSNorm_h(y ⊙ SiLU(z)) · w_norm per head (eps 1e-5, gate before norm), with the stock write
  w_t = Δ_t (Mamba-in-the-Llama's block: its D·x skip weighs against the scan's scale, so nothing is divided);
- ``feature_maps=False``: no φ, B and C are the conv's outputs (d_state = D; Mamba-in-the-Llama);
- ``conv_bias=True``: a bias after the conv taps, before the activation (Mamba's ``nn.Conv1d``).

Initialised from a Hedgehog layer (:func:`relin.models.convert.hedgemamba.hedgemamba_from_hedgehog`) it
equals that layer to fp32 rounding; "identity" is made exact where a stock block cannot express it
(methods.md §7A.3-5):

- Λ = I (:meth:`HedgeMamba.set_identity`, ``decay``): ``exact``, A_log = −20 and Δ = 1, so the per-token log
  decay −e^{−20} ≈ −2·10⁻⁹ and Λ_t rounds to 1 in fp32 (its gradient, ~1e-12, is below AdamW's eps: it moves
  only with its own optimizer settings); ``near_identity``, A = e^{A_log} = ½ and Δ̄ = 2ρ/T_max, a per-token log
  decay of ρ/T_max (ρ = :data:`NEAR_IDENTITY_RHO`, T_max the longest row the model takes), so over any
  evaluated row Λ's effect on the logits stays below 1e-4 while A_log's gradient (∝ ρ) stays far above eps;
- Δ: W_Δ = 0 makes Δ a constant per head, which the write weight and eq. 9's division both cancel;
- the conv: the identity filter (last tap 1) and no activation after it (``conv_activation="identity"``,
  Phi-Mamba's choice; ``silu`` is the stock block, :meth:`HedgeMamba.set_conv_activation` switches it on for
  stage 2, the "original Mamba branches" of §3.2, and the block is then no longer exact);
- the gate: W_z = 0 with the bias b_z = 1.27846…, the root of b·σ(b) = 1, so SiLU(z) = 1 (Mamba's in_proj
  has no bias; this block's gate projection does, for that reason);
- D = 0; the normaliser is an explicit division after the scan, in place of Mamba-2's gated RMSNorm,
  which rescales by ‖y‖ and cannot express it.

Stage 2 trains all of it; the conv, gate, Δ and Λ then move away from the identity. Padding positions
write nothing (inputs zeroed, Δ and the decay zero there).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..config.hedgemamba import MambaBlockConfig
from .hedgehog import HedgehogFeatureMap
from .short_conv import ShortConvolution

CONV_ACTIVATIONS = ("identity", "silu")
NORMS = ("ratio", "none", "gated_rms")
DECAY_INITS = ("exact", "near_identity")
# b with b·σ(b) = 1 (SiLU(b) = 1), by Newton's method in float64.
GATE_IDENTITY_BIAS = 1.2784645427610738
# ``exact``: Λ = exp(−e^{A_log}·Δ) rounds to 1 in fp32 for Δ ≤ 1 (log decay ≈ −2e-9 per token).
IDENTITY_A_LOG = -20.0
# ``near_identity``: A = ½, O(1), so a step of the size AdamW takes (~lr) is a relative change of ~lr/ln 2 in A_log.
NEAR_IDENTITY_A_LOG = -math.log(2.0)
# ``near_identity``: Λ's total log decay over the longest row, ρ = r·T_max (r the per-token rate; half-life 7e6 tokens
# at T_max = 1024). Both the logit gap and A_log's gradient grow as ρ: on the default DAG's trained stage-1 model
# (logits up to 16.9) 1e-4 moves the logits ≤ 6e-5 at 256 and 1024 tokens (2e-4: 1.2e-4), while A_log's gradient
# on stage 2's rows is 8-100x AdamW's eps on 7 of its 8 heads (the exact init's: 1e-12 to 2e-9).
NEAR_IDENTITY_RHO = 1e-4
# Mamba-2's gated RMSNorm epsilon (mamba_ssm ``RMSNormGated(eps=1e-5)``).
GATED_RMS_EPS = 1e-5


def inverse_softplus(y: float) -> float:
    """x with softplus(x) = y, in float64 (``log(expm1(y))``, exact down to y ~ 1e-300)."""
    return y + math.log(-math.expm1(-y))


@dataclass
class HedgeMambaState:
    """Decoding state: conv inputs ``[B, 3·H·D, K−1]`` and the SSM state ``S [B, H, F, D]`` (F = 2D, or D without
    φ), with the normaliser ``z [B, H, F]`` when ``norm="ratio"`` (else None), fp32."""

    conv: torch.Tensor
    recurrent: torch.Tensor
    normalizer: torch.Tensor | None

    def nbytes(self) -> int:
        return self.conv.nbytes + self.recurrent.nbytes + (0 if self.normalizer is None else self.normalizer.nbytes)


def _option(cfg, name: str, given, default):
    """An option from its argument, else the block config's field (once the config has one), else ``default``."""
    return given if given is not None else getattr(cfg, name, default)


class HedgeMamba(nn.Module):
    """Args:
        width (int): model width C.
        num_heads (int): H.
        head_dim (int): D, the width of x per head (the teacher's head dim); d_state = 2D (D without φ).
        cfg (MambaBlockConfig): conv taps and activation (``identity``: the exact initialisation; ``silu``:
            stock Mamba).
        feature_map (str): φ of B and C, ``exp`` | ``softmax`` (the Hedgehog layer's). Default: ``exp``.
        bias (bool): biases on the x/B/C and output projections (GPT-NeoX's attention has them). Default: True.
        backend (str): kernel backend, ``auto`` | ``triton`` | ``torch``. Default: ``auto``.
        norm (str, Optional): ``ratio`` (eqs. 9-10) | ``none`` (eq. 8) | ``gated_rms`` (Mamba-2). Default: ``cfg.norm``,
            else ``ratio``.
        feature_maps (bool, Optional): φ on B and C (eq. 7). Default: ``cfg.feature_maps``, else True.
        conv_bias (bool, Optional): a bias on the conv's channels. Default: ``cfg.conv_bias``, else False.
    """

    def __init__(self, width: int, num_heads: int, head_dim: int, cfg: MambaBlockConfig | None = None, *,
                 feature_map: str = "exp", bias: bool = True, backend: str = "auto", norm: str | None = None,
                 feature_maps: bool | None = None, conv_bias: bool | None = None):
        super().__init__()
        cfg = cfg or MambaBlockConfig()
        conv_size = cfg.conv_size
        self.norm = _option(cfg, "norm", norm, "ratio")
        feature_maps = _option(cfg, "feature_maps", feature_maps, True)
        if self.norm not in NORMS:
            raise ValueError(f"norm {self.norm!r}: expected one of {', '.join(NORMS)}")
        self.num_heads, self.head_dim, self.backend = num_heads, head_dim, backend
        inner = num_heads * head_dim
        self.x_proj = nn.Linear(width, inner, bias=bias)
        self.B_proj = nn.Linear(width, inner, bias=bias)
        self.C_proj = nn.Linear(width, inner, bias=bias)
        self.z_proj = nn.Linear(width, inner, bias=True)
        self.dt_proj = nn.Linear(width, num_heads, bias=False)
        self.out_proj = nn.Linear(inner, width, bias=bias)
        # the taps only: the bias and the activation follow in forward (the decode state is the raw inputs)
        self.conv = ShortConvolution(3 * inner, conv_size, "none")
        self.conv_bias = nn.Parameter(torch.zeros(3 * inner)) if _option(cfg, "conv_bias", conv_bias, False) else None
        self.set_conv_activation(cfg.conv_activation)
        if feature_maps:
            self.feature_map_B = HedgehogFeatureMap(num_heads, head_dim, feature_map)
            # the query shift is a per-token factor only eq. 9's ratio divides out
            self.feature_map_C = HedgehogFeatureMap(num_heads, head_dim, feature_map, shift=self.norm == "ratio")
        else:
            self.feature_map_B = self.feature_map_C = None
        self.norm_weight = nn.Parameter(torch.ones(inner)) if self.norm == "gated_rms" else None
        self.A_log = nn.Parameter(torch.empty(num_heads))
        self.dt_bias = nn.Parameter(torch.empty(num_heads))
        self.D = nn.Parameter(torch.empty(num_heads))
        self.reset_ssm()

    def set_conv_activation(self, activation: str) -> None:
        """``identity`` (the exact init) or ``silu`` (stock Mamba; stage 2 unlocks it, §3.2)."""
        if activation not in CONV_ACTIVATIONS:
            raise ValueError(f"conv_activation {activation!r}: expected one of {', '.join(CONV_ACTIVATIONS)}")
        self.conv_activation = activation

    @torch.no_grad()
    def reset_ssm(self, generator: torch.Generator | None = None) -> None:
        """mamba_ssm's ``Mamba2`` init of the SSM parameters, in its order of draws: Δ log-uniform in [1e-3, 0.1]
        (floored at 1e-4) as the bias softplus⁻¹(Δ), then A ~ U(1, 16), A_log = log A; D = 1; the gate bias 0
        and the output norm's weight 1 (a block from scratch: the random-init control, Mamba-in-the-Llama's)."""
        dt_min, dt_max = 1e-3, 0.1
        dt = torch.exp(torch.rand(self.num_heads, generator=generator) * (math.log(dt_max) - math.log(dt_min))
                       + math.log(dt_min))
        dt = torch.clamp(dt, min=1e-4)
        self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))
        self.A_log.copy_(torch.empty(self.num_heads, dtype=torch.float32).uniform_(1, 16, generator=generator).log())
        self.D.fill_(1.0)
        self.z_proj.bias.zero_()
        if self.norm_weight is not None:
            self.norm_weight.fill_(1.0)

    @torch.no_grad()
    def reset_conv(self, generator: torch.Generator | None = None) -> None:
        """``nn.Conv1d``'s default init of the depthwise taps and bias, U(±1/√K) (fan-in K): Mamba's conv."""
        bound = 1.0 / math.sqrt(self.conv.weight.shape[1])
        self.conv.weight.uniform_(-bound, bound, generator=generator)
        if self.conv_bias is not None:
            self.conv_bias.uniform_(-bound, bound, generator=generator)

    @torch.no_grad()
    def set_identity(self, decay: str = "exact", max_length: int | None = None) -> None:
        """Λ ≈ I, constant Δ, identity conv, SiLU(gate) = 1, D = 0 (the module docstring says why each is exact).

        ``decay``: ``exact`` (A_log = −20, Δ = 1) or ``near_identity`` (A = ½, per-token log decay
        ρ/``max_length``, the longest row the model takes)."""
        if decay not in DECAY_INITS:
            raise ValueError(f"decay {decay!r}: expected one of {', '.join(DECAY_INITS)}")
        if decay == "exact":
            self.A_log.fill_(IDENTITY_A_LOG)
            self.dt_bias.fill_(inverse_softplus(1.0))
        else:
            if not max_length or max_length < 1:
                raise ValueError(f"near_identity decay: max_length must be a positive length, got {max_length!r}")
            self.A_log.fill_(NEAR_IDENTITY_A_LOG)
            rate = NEAR_IDENTITY_RHO / max_length
            self.dt_bias.fill_(inverse_softplus(rate / math.exp(NEAR_IDENTITY_A_LOG)))
        self.dt_proj.weight.zero_()
        self.conv.weight.zero_()
        self.conv.weight[:, -1] = 1.0
        if self.conv_bias is not None:
            self.conv_bias.zero_()
        self.z_proj.weight.zero_()
        self.z_proj.bias.fill_(GATE_IDENTITY_BIAS)
        self.D.zero_()

    def forward(self, hidden_states: torch.Tensor, padding: torch.Tensor | None = None,
                state: HedgeMambaState | None = None, use_cache: bool = False
                ) -> tuple[torch.Tensor, HedgeMambaState | None]:
        """``hidden_states [B, T, C]``, ``padding [B, T_past + T]`` (1 = real token). Returns ``[B, T, C]``
        and the state after the last token (when ``use_cache``)."""
        from relin.kernels.decayed_linear_attn import chunk_decayed_linear_attn

        batch, steps, _ = hidden_states.shape
        real = (torch.ones(batch, steps, device=hidden_states.device) if padding is None
                else padding[:, -steps:].to(hidden_states.dtype))
        u = hidden_states * real[..., None]
        xbc = torch.cat([self.x_proj(u), self.B_proj(u), self.C_proj(u)], dim=-1)
        xbc, conv_state = self.conv(xbc, None if state is None else state.conv)
        if self.conv_bias is not None:
            xbc = xbc + self.conv_bias.to(xbc.dtype)
        if self.conv_activation == "silu":
            xbc = F.silu(xbc)
        heads = (batch, steps, self.num_heads, self.head_dim)
        x, b, c = (part.reshape(heads) for part in xbc.chunk(3, dim=-1))
        dt = F.softplus(self.dt_proj(u).float() + self.dt_bias.float()) * real[..., None]      # [B, T, H]
        g = -self.A_log.float().exp() * dt
        # the write weight w_t (module docstring): Δ_t / Δ̄ in HedgeMamba's forms, Mamba-2's Δ_t with its norm
        write = dt if self.norm == "gated_rms" else dt / F.softplus(self.dt_bias.float())
        if self.feature_map_B is not None:
            b, c = self.feature_map_B(b), self.feature_map_C(c)                               # [B, T, H, 2D]
        k = b * write[..., None].to(b.dtype)
        initial = None if state is None else (state.recurrent if state.normalizer is None
                                              else (state.recurrent, state.normalizer))
        ratio = self.norm == "ratio"
        y, final = chunk_decayed_linear_attn(c, k, x, g=g, scale=None if ratio else 1.0, normalize=ratio,
                                             initial_state=initial, output_final_state=use_cache,
                                             backend=self.backend)
        y = y + self.D.to(y.dtype)[:, None] * x
        y = y * F.silu(self.z_proj(u)).reshape(heads)
        if self.norm_weight is not None:            # Mamba-2's RMSNormGated, norm_before_gate=False, per head
            y32 = y.float()
            y = (y32 * torch.rsqrt(y32.pow(2).mean(-1, keepdim=True) + GATED_RMS_EPS)).to(y.dtype)
            y = y * self.norm_weight.to(y.dtype).view(self.num_heads, self.head_dim)
        if use_cache:
            new_state = HedgeMambaState(conv_state, *(final if ratio else (final, None)))
        else:
            new_state = None
        return self.out_proj(y.reshape(batch, steps, -1)), new_state
