"""Multi-timescale diagonal retention, the LIA-MTR bridge recurrence (eqs. 3-5)."""
from .chunk import multiscale_diag_retention
from .recurrent import multiscale_diag_retention_step
from .ref import naive_multiscale_diag_retention
from .torch_chunk import chunked_multiscale_diag_retention

__all__ = [
    "multiscale_diag_retention",
    "multiscale_diag_retention_step",
    "naive_multiscale_diag_retention",
    "chunked_multiscale_diag_retention",
]
