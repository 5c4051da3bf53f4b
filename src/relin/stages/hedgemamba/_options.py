"""What the HedgeMamba stages share of their config."""
from __future__ import annotations

from ...config.hedgemamba import HedgehogLayerConfig


def hedgehog_options(layer: HedgehogLayerConfig, backend: str) -> dict:
    """The hybrid config options of the Hedgehog layers."""
    return {"hedgehog_feature_map": layer.feature_map, "hedgehog_feature_position": layer.feature_position,
            "kernel_backend": backend}
