"""The HedgeMamba block (seeds/001 §3.2, eqs. 7-10, Fig. 2): a Mamba-2-style block with a value projection
before the SSM and the Hedgehog feature map on B and C, on :func:`relin.kernels.chunk_decayed_linear_attn`.

Per head h (every head has its own B and C: Mamba-2's ``ngroups = H``, d_state = 2D, the feature width):

    [x, B, C] = act(conv([W_V u + b_V, W_K u + b_K, W_Q u + b_Q]))   depthwise causal conv over time
    Δ_t = softplus(W_Δ u_t + b_Δ),  Λ_t = exp(−e^{A_log} Δ_t)          scalar per head (Mamba-2)
    S_t = Λ_t S_{t−1} + Δ_t φ_B(B_t) x_tᵀ,  z_t = Λ_t z_{t−1} + Δ_t φ_B(B_t)          (eq. 10: V with a ones
    y_t = S_tᵀ φ_C(C_t) / (φ_C(C_t)·z_t) + D x_t                          column, Λ duplicated)
    out = W_O (y ⊙ SiLU(W_z u + b_z)) + b_O

Initialised from a Hedgehog layer (:func:`relin.models.convert.hedgemamba.hedgemamba_from_hedgehog`) it
equals that layer to fp32 rounding; "identity" is made exact where a stock block cannot express it
(methods.md §7A.3-5):

- Λ = I: A_log = −20, so the per-token log decay −e^{−20}·Δ ≈ −2·10⁻⁹ and Λ_t rounds to 1 in fp32;
- Δ: W_Δ = 0 makes Δ a constant per head; as the ones column is scaled by the same Δ, any constant cancels
  in the division (b_Δ = softplus⁻¹(1) keeps Δ = 1);
- the conv: the identity filter (last tap 1) and no activation after it (``conv_activation="identity"``,
  Phi-Mamba's choice; ``silu`` is the stock block and is not exact);
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
# b with b·σ(b) = 1 (SiLU(b) = 1), by Newton's method in float64.
GATE_IDENTITY_BIAS = 1.2784645427610738
# Λ = exp(−e^{A_log}·Δ) rounds to 1 in fp32 for Δ ≤ 1 (log decay ≈ −2e-9 per token).
IDENTITY_A_LOG = -20.0


@dataclass
class HedgeMambaState:
    """Decoding state: conv inputs ``[B, 3·H·D, K−1]`` and the normalised SSM state ``S [B, H, 2D, D]``,
    ``z [B, H, 2D]`` (fp32)."""

    conv: torch.Tensor
    recurrent: torch.Tensor
    normalizer: torch.Tensor

    def nbytes(self) -> int:
        return self.conv.nbytes + self.recurrent.nbytes + self.normalizer.nbytes


class HedgeMamba(nn.Module):
    """Args:
        width (int): model width C.
        num_heads (int): H.
        head_dim (int): D, the width of x per head (the teacher's head dim); d_state = 2D.
        cfg (MambaBlockConfig): conv taps and activation (``identity``: the exact initialisation; ``silu``:
            stock Mamba).
        feature_map (str): φ of B and C, ``exp`` | ``softmax`` (the Hedgehog layer's). Default: ``exp``.
        bias (bool): biases on the x/B/C and output projections (GPT-NeoX's attention has them). Default: True.
        backend (str): kernel backend, ``auto`` | ``triton`` | ``torch``. Default: ``auto``.
    """

    def __init__(self, width: int, num_heads: int, head_dim: int, cfg: MambaBlockConfig | None = None, *,
                 feature_map: str = "exp", bias: bool = True, backend: str = "auto"):
        super().__init__()
        cfg = cfg or MambaBlockConfig()
        conv_size, conv_activation = cfg.conv_size, cfg.conv_activation
        if conv_activation not in CONV_ACTIVATIONS:
            raise ValueError(f"conv_activation {conv_activation!r}: expected one of {', '.join(CONV_ACTIVATIONS)}")
        self.num_heads, self.head_dim, self.backend = num_heads, head_dim, backend
        inner = num_heads * head_dim
        self.x_proj = nn.Linear(width, inner, bias=bias)
        self.B_proj = nn.Linear(width, inner, bias=bias)
        self.C_proj = nn.Linear(width, inner, bias=bias)
        self.z_proj = nn.Linear(width, inner, bias=True)
        self.dt_proj = nn.Linear(width, num_heads, bias=False)
        self.out_proj = nn.Linear(inner, width, bias=bias)
        self.conv = ShortConvolution(3 * inner, conv_size, "silu" if conv_activation == "silu" else "none")
        self.feature_map_B = HedgehogFeatureMap(num_heads, head_dim, feature_map)
        self.feature_map_C = HedgehogFeatureMap(num_heads, head_dim, feature_map, shift=True)
        self.A_log = nn.Parameter(torch.empty(num_heads))
        self.dt_bias = nn.Parameter(torch.empty(num_heads))
        self.D = nn.Parameter(torch.empty(num_heads))
        self.reset_ssm()

    @torch.no_grad()
    def reset_ssm(self, generator: torch.Generator | None = None) -> None:
        """Mamba-2's init of the SSM parameters: A ~ U(1, 16), Δ log-uniform in [1e-3, 0.1], D = 1; the
        gate bias 0 (a block from scratch: the random-init control)."""
        self.A_log.copy_(torch.empty(self.num_heads).uniform_(1, 16, generator=generator).log())
        dt = torch.exp(torch.empty(self.num_heads).uniform_(math.log(1e-3), math.log(0.1), generator=generator))
        self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))
        self.D.fill_(1.0)
        self.z_proj.bias.zero_()

    @torch.no_grad()
    def set_identity(self) -> None:
        """Λ = I, constant Δ = 1, identity conv, SiLU(gate) = 1, D = 0 (the module docstring says why each is exact)."""
        self.A_log.fill_(IDENTITY_A_LOG)
        self.dt_proj.weight.zero_()
        self.dt_bias.fill_(math.log(math.expm1(1.0)))
        self.conv.weight.zero_()
        self.conv.weight[:, -1] = 1.0
        self.z_proj.weight.zero_()
        self.z_proj.bias.fill_(GATE_IDENTITY_BIAS)
        self.D.zero_()

    def forward(self, hidden_states: torch.Tensor, padding: torch.Tensor | None = None,
                state: HedgeMambaState | None = None, use_cache: bool = False
                ) -> tuple[torch.Tensor, HedgeMambaState | None]:
        """``hidden_states [B, T, C]``, ``padding [B, T_past + T]`` (1 = real token). Returns ``[B, T, C]``
        and the state after the last token (when ``use_cache``)."""
        from relin.kernels import chunk_decayed_linear_attn

        batch, steps, _ = hidden_states.shape
        real = (torch.ones(batch, steps, device=hidden_states.device) if padding is None
                else padding[:, -steps:].to(hidden_states.dtype))
        u = hidden_states * real[..., None]
        xbc = torch.cat([self.x_proj(u), self.B_proj(u), self.C_proj(u)], dim=-1)
        xbc, conv_state = self.conv(xbc, None if state is None else state.conv)
        heads = (batch, steps, self.num_heads, self.head_dim)
        x, b, c = (part.reshape(heads) for part in xbc.chunk(3, dim=-1))
        dt = F.softplus(self.dt_proj(u).float() + self.dt_bias.float()) * real[..., None]      # [B, T, H]
        g = -self.A_log.float().exp() * dt
        k = self.feature_map_B(b) * dt[..., None].to(b.dtype)
        q = self.feature_map_C(c)
        initial = None if state is None else (state.recurrent, state.normalizer)
        y, final = chunk_decayed_linear_attn(q, k, x, g=g, normalize=True, initial_state=initial,
                                             output_final_state=use_cache, backend=self.backend)
        y = y + self.D.to(y.dtype)[:, None] * x
        y = y.reshape(batch, steps, -1) * F.silu(self.z_proj(u))
        new_state = HedgeMambaState(conv_state, *final) if use_cache else None
        return self.out_proj(y), new_state
