"""Training objectives, registered by exact name: ``ce``, ``ce_row_mean``, ``kd``, ``layer_align``,
``attention_match``, ``onpolicy``, ``clip``, ``vlm_ce``, ``readout_ce``
(:func:`build_objective` raises on an unknown name). See :mod:`.base` for the interface."""
from .attention_match import AttentionMatch  # noqa: F401
from .base import OBJECTIVES, Objective, ObjectiveOutput, build_objective, next_token_mask, register  # noqa: F401
from .ce import CrossEntropy, RowMeanCrossEntropy  # noqa: F401
from .kd import Distillation, chunked_divergence, divergence_sum  # noqa: F401
from .layer_align import LayerAlignment  # noqa: F401
from .onpolicy import OnPolicyDistillation  # noqa: F401
from .readout import ReadoutCrossEntropy  # noqa: F401
from .vision import Contrastive, VisionCrossEntropy  # noqa: F401
