"""One decoding step of a depthwise causal short convolution (state shifted in place) and its fp32 reference."""
from .ref import naive_short_conv_step
from .step import short_conv_step

__all__ = ["short_conv_step", "naive_short_conv_step"]
