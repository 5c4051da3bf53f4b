"""``relin lia-mtr-vlm-photos``: the real photos of installed packages described by a VLM after each phase. A tiny
DINOv2 tower (with its image processor) and two tiny VLMs stand in for the overlay's; the stage must find the photos
through the packages' RECORDs, prepare each with the tower's processor, and write each phase's own answers, with the
packages it left out named."""
from __future__ import annotations

import json

import torch

from relin.cli import main
from relin.config.lia_mtr import BridgeConfig, MTRConfig
from relin.data.vision.synth import vocabulary
from relin.models.vlm.chat import IMAGE, build_chat_tokenizer

SIDE, WIDTH = 28, 16  # 2 x 2 patches of 14 px


def save_tower(folder):
    from transformers import Dinov2Config, Dinov2Model

    from relin.models.onnx_dinov2 import image_processor

    torch.manual_seed(0)
    tower = Dinov2Model(Dinov2Config(hidden_size=WIDTH, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2,
                                     patch_size=14, image_size=SIDE))
    tower.save_pretrained(folder, safe_serialization=True)
    image_processor(SIDE).save_pretrained(folder)


def save_vlm(folder, tokenizer, seed: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from relin.layers.bridges import Bridge
    from relin.models.vlm.model import BridgeVLM

    torch.manual_seed(seed)
    llm = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
                                       num_attention_heads=2, num_key_value_heads=1, intermediate_size=32,
                                       initializer_range=0.5))
    vlm = BridgeVLM(Bridge("lia_mtr", WIDTH, 16, BridgeConfig(mtr=MTRConfig(num_scales=2))), llm,
                    tokenizer.convert_tokens_to_ids(IMAGE))
    vlm.save_pretrained(folder)
    tokenizer.save_pretrained(str(folder))


def test_each_phase_describes_every_installed_photo(tmp_path, monkeypatch, capsys):
    from relin.data.vision.photos import PHOTOS, available_photos

    monkeypatch.setenv("RELIN_TRACKING", "0")
    tokenizer = build_chat_tokenizer(vocabulary())
    save_tower(tmp_path / "tower")
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "features.json").write_text(json.dumps({"select_layer": -2}))
    save_vlm(tmp_path / "align", tokenizer, seed=1)
    save_vlm(tmp_path / "instruct", tokenizer, seed=2)
    code = main(["lia-mtr-vlm-photos", "--config", json.dumps({"eval": {"batch_size": 4}}), "--tower",
                 str(tmp_path / "tower"), "--features", str(tmp_path / "features"), "--model",
                 f"align={tmp_path / 'align'}", f"instruct={tmp_path / 'instruct'}", "--out", str(tmp_path / "out")])
    assert code == 0, capsys.readouterr().err

    found, missing = available_photos()
    assert len(found) >= 3, "scikit-learn's two photos and matplotlib's portrait ship with the project's dependencies"
    out = json.loads((tmp_path / "out" / "photos.json").read_text())
    assert [row["file"] for row in out["photos"]] == [photo.path for photo, _ in found]
    assert out["left_out"] == missing and out["phases"] == ["align", "instruct"]
    installed = {photo.package for photo, _ in found}
    assert all(any(photo.package in note for note in missing) for photo in PHOTOS if photo.package not in installed)
    assert all(isinstance(row[p], str) for row in out["photos"] for p in ("align", "instruct"))
    assert [row["align"] for row in out["photos"]] != [row["instruct"] for row in out["photos"]], \
        "two different VLMs: each phase's answers are its own model's"
    table = (tmp_path / "out" / "photos.md").read_text()
    assert table.count("\n| ") == 1 + len(found), "a header and a row per photo"


def test_photos_differ_in_the_towers_features(tmp_path):
    """Each photo is prepared on its own (any size, the processor's crop): two photos give two feature maps."""
    from relin.data.vision.photos import available_photos
    from relin.models.vlm.tower import load_image_processor, load_vision_tower
    from relin.stages.lia_mtr.vlm_photos import photo_features

    save_tower(tmp_path / "tower")
    found, _ = available_photos()
    features = photo_features(load_vision_tower(tmp_path / "tower"), load_image_processor(tmp_path / "tower"),
                              [image for _, image in found[:2]], -2)
    assert features.shape == (2, 4, WIDTH)
    assert not torch.allclose(features[0], features[1])


def test_no_processor_is_one_line(tmp_path, monkeypatch, capsys):
    from transformers import Dinov2Config, Dinov2Model

    monkeypatch.setenv("RELIN_TRACKING", "0")
    Dinov2Model(Dinov2Config(hidden_size=WIDTH, num_hidden_layers=1, num_attention_heads=2, patch_size=14,
                             image_size=SIDE)).save_pretrained(tmp_path / "tower")
    capsys.readouterr()  # the save's progress bars, not the stage's
    code = main(["lia-mtr-vlm-photos", "--config", json.dumps({"eval": {"batch_size": 4}}), "--tower",
                 str(tmp_path / "tower"), "--features", str(tmp_path), "--model", f"align={tmp_path}",
                 "--out", str(tmp_path / "out")])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code != 0 and len(err) == 1 and "preprocessor_config.json" in err[0], err
    assert not (tmp_path / "out").exists()
