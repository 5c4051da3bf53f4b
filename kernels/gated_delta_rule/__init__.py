"""Gated delta rule (OPAL's Gated DeltaNet): chunked and recurrent ops, fp32 reference."""
from .chunk import ChunkGatedDeltaRuleFunction, chunk_gated_delta_rule
from .recurrent import fused_recurrent_gated_delta_rule
from .ref import naive_recurrent_gated_delta_rule

__all__ = ["ChunkGatedDeltaRuleFunction", "chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule",
           "naive_recurrent_gated_delta_rule"]
