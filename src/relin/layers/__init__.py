"""Token mixers and the blocks around them. A layer calls ``relin.kernels`` only (Triton on CUDA, the
PyTorch path on CPU); it never imports training code. Shape legend: B batch, T tokens, H heads,
D / K / V head widths, C model width.

- :mod:`.norms`: RMSNorm and the gated RMSNorm of Gated DeltaNet;
- :mod:`.rotary`: rotary position embeddings;
- :mod:`.attention`: softmax attention (full, or a sliding window with sink tokens) with a KV cache;
- :mod:`.gated_deltanet`: Gated DeltaNet (OPAL's linear layer) with its recurrent and conv states;
- :mod:`.mlp`: the gated MLP of Qwen3-style blocks.
"""
