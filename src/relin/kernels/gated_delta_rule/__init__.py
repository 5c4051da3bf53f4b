"""Gated delta rule (OPAL's Gated DeltaNet): chunked and recurrent ops, the per-head gates, fp32 references."""
from .chunk import ChunkGatedDeltaRuleFunction, chunk_gated_delta_rule
from .gates import gdn_gates
from .recurrent import fused_recurrent_gated_delta_rule
from .ref import naive_gdn_gates, naive_recurrent_gated_delta_rule

__all__ = ["ChunkGatedDeltaRuleFunction", "chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule",
           "gdn_gates", "naive_gdn_gates", "naive_recurrent_gated_delta_rule"]
