"""The VLM's chat format supervises only assistant tokens; the paper config's loaders build every model from
locally saved checkpoints of the paper's classes (CLIPVisionModel, Qwen2ForCausalLM) without the network."""
import pytest
import torch

from relin.artifacts import IGNORE_INDEX
from relin.config.lia_mtr import BridgeConfig, MTRConfig
from relin.data.vision.synth import vocabulary
from relin.models.vlm.chat import IM_END, IMAGE, build_chat_tokenizer, encode_caption, encode_chat, expand_image_tokens


@pytest.fixture(scope="module")
def tokenizer():
    return build_chat_tokenizer(vocabulary())


def test_only_assistant_tokens_are_supervised(tokenizer):
    messages = [{"role": "user", "content": f"{IMAGE} what scene is this ?"},
                {"role": "assistant", "content": "a rising scene ."},
                {"role": "user", "content": "is the leftmost object blue ? answer yes or no ."},
                {"role": "assistant", "content": "yes"}]
    ids, labels = encode_chat(tokenizer, messages)
    ids, labels = expand_image_tokens(ids, labels, tokenizer.convert_tokens_to_ids(IMAGE), 9)
    supervised = tokenizer.convert_ids_to_tokens([i for i, lab in zip(ids, labels) if lab != IGNORE_INDEX])
    assert supervised == ["\u2581a", "\u2581rising", "\u2581scene", "\u2581", ".", IM_END, "\u2581yes", IM_END]
    assert all(lab == IGNORE_INDEX for i, lab in zip(ids, labels) if i == tokenizer.convert_tokens_to_ids(IMAGE))
    assert sum(i == tokenizer.convert_tokens_to_ids(IMAGE) for i in ids) == 9
    user_words = set(tokenizer.convert_tokens_to_ids(["\u2581what", "\u2581object", "\u2581user", "\u2581assistant"]))
    assert not any(lab in user_words for lab in labels), "a user-turn or role token is supervised"


def test_caption_rows_supervise_the_caption_and_end_only(tokenizer):
    ids, labels = encode_caption(tokenizer, "a row scene")
    assert labels[0] == IGNORE_INDEX and ids[0] == tokenizer.convert_tokens_to_ids(IMAGE)
    assert tokenizer.convert_ids_to_tokens(labels[1:]) == ["\u2581a", "\u2581row", "\u2581scene", IM_END]


def test_paper_config_loads_local_tiny_checkpoints_offline(tmp_path, tokenizer, monkeypatch):
    from transformers import CLIPVisionConfig, CLIPVisionModel, Qwen2Config, Qwen2ForCausalLM

    from relin.layers.bridges import Bridge
    from relin.models.teachers import load_pretrained
    from relin.models.vlm.model import BridgeVLM
    from relin.models.vlm.tower import load_vision_tower, patch_features

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    vision = CLIPVisionModel(CLIPVisionConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                              intermediate_size=32, image_size=16, patch_size=4))
    vision.save_pretrained(tmp_path / "clip", safe_serialization=True)
    llm = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
                                       num_attention_heads=2, num_key_value_heads=1, intermediate_size=32))
    llm.save_pretrained(tmp_path / "qwen2", safe_serialization=True)
    tower, lm = load_vision_tower(tmp_path / "clip"), load_pretrained(str(tmp_path / "qwen2"))
    assert type(tower).__name__ == "CLIPVisionModel" and type(lm).__name__ == "Qwen2ForCausalLM"
    features = patch_features(tower, torch.randint(0, 255, (2, 16, 16, 3), dtype=torch.uint8), progress=False)
    assert features.shape == (2, 16, 16), "penultimate layer, 16 patches, CLS dropped"
    vlm = BridgeVLM(Bridge("lia_mtr", 16, 16, BridgeConfig(mtr=MTRConfig(num_scales=2))), lm,
                    tokenizer.convert_tokens_to_ids(IMAGE))
    ids = torch.tensor([[5] + [vlm.image_token_id] * 16 + [6]] * 2)
    assert vlm(ids, torch.ones_like(ids), features).logits.shape == (2, 18, len(tokenizer))
    vlm.save_pretrained(tmp_path / "vlm")
    again = BridgeVLM.from_pretrained(tmp_path / "vlm")
    assert torch.allclose(again(ids, torch.ones_like(ids), features).logits, vlm(ids, torch.ones_like(ids),
                                                                                  features).logits, atol=1e-6)
