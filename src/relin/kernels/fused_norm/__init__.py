"""RMSNorm, alone, after the residual add, or gated (Gated DeltaNet's output norm): a one-pass kernel and its
fp32 reference."""
from .norm import rms_norm
from .ref import naive_rms_norm

__all__ = ["rms_norm", "naive_rms_norm"]
