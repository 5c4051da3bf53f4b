"""Real data formats: the corpus packed in a checkpoint's tokenizer and read back memory-mapped, LLaVA JSON and
MME's release folders imported in the synth_vision layout, and one line for each damaged input."""
import json

import numpy as np
import pytest

from relin.config.corpus import CorpusConfig
from relin.config.lia_mtr import LlavaDataConfig
from relin.data.corpus import build_corpus
from relin.data.token_rows import TokenRows
from relin.data.vision.llava import import_llava
from relin.data.vision.loaders import load_mme_release
from relin.errors import InputError

from ..fake_hub import bpe_tokenizer
from ..real_data import write_corpus, write_llava, write_mme


@pytest.fixture(scope="module")
def tokenizer():
    return bpe_tokenizer("qwen3")


def test_token_rows_from_lists_and_arrow_agree(tmp_path, seed):
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    rows = [rng.integers(0, 1000, int(n)).tolist() for n in rng.integers(1, 30, 57)]
    arrow = pa.chunked_array([pa.array(rows[:20]), pa.array(rows[20:]).slice(3)])  # a sliced chunk too
    expected = rows[:20] + rows[23:]
    for stored in (TokenRows.from_lists(expected), TokenRows.from_arrow(arrow)):
        assert len(stored) == len(expected)
        assert stored.lengths.tolist() == [len(r) for r in expected]
        assert all(stored[i].tolist() == expected[i] for i in range(len(expected)))
        assert stored[-1].tolist() == expected[-1] and stored.head(3) == expected[:3]
        with pytest.raises(IndexError):
            stored[len(expected)]


def test_corpus_rows_are_the_documents_packed_with_eos(tmp_path, tokenizer):
    path = write_corpus(tmp_path / "c.jsonl", documents=30)
    cfg = CorpusConfig(files=[str(path)], seq_len=32, test_rows=2)
    data = build_corpus(cfg, tokenizer)
    texts = [json.loads(line)["text"] for line in path.read_text().splitlines()]
    eos = tokenizer.eos_token_id
    stream = [t for text in texts for t in tokenizer(text, add_special_tokens=False)["input_ids"] + [eos]]
    rows = [*data["train"]["input_ids"], *data["test"]["input_ids"]]
    assert len(rows) == len(stream) // 32 and len(data["test"]) == 2
    assert [t for r in rows for t in r] == stream[:len(rows) * 32]
    assert set(data["train"]["task"]) == {"corpus"}

    limited = build_corpus(CorpusConfig(files=[str(path)], seq_len=32, test_rows=1, max_tokens=200), tokenizer)
    assert len(limited["train"]) + len(limited["test"]) == 200 // 32


def test_corpus_saved_then_loaded_trains_from_memory_mapped_rows(tmp_path, tokenizer):
    from relin.stages._training import TextData
    from relin.train.batching import StepBatches

    data = build_corpus(CorpusConfig(files=[str(write_corpus(tmp_path / "c.jsonl"))], seq_len=24, test_rows=2),
                        tokenizer)
    data.save_to_disk(str(tmp_path / "out"))
    tokenizer.save_pretrained(str(tmp_path / "out" / "tokenizer"))
    loaded = TextData.load(tmp_path / "out")
    assert isinstance(loaded.input_ids, TokenRows) and loaded.labels is loaded.input_ids
    assert loaded.input_ids[0].tolist() == data["train"][0]["input_ids"]
    assert loaded.prompts()["corpus"][0] == data["train"][0]["input_ids"][:12]
    batch = StepBatches(loaded.input_ids, loaded.labels, batch_size=3, pad_id=0).micro_batches(1, 1)[0]
    assert batch["input_ids"].shape == (3, 24) and (batch["labels"] == batch["input_ids"]).all()


@pytest.mark.parametrize("damage, message", [
    ("missing", "not found"), ("field", "no 'text' column"), ("json", "unreadable as json")])
def test_damaged_corpus_is_one_line(tmp_path, tokenizer, damage, message):
    path = tmp_path / "c.jsonl"
    if damage == "field":
        path.write_text('{"body": "a b c"}\n')
    elif damage == "json":
        path.write_text('{"text": "a b\n')
    with pytest.raises(InputError, match=message):
        build_corpus(CorpusConfig(files=[str(path)], seq_len=16), tokenizer)


def test_llava_and_mme_import_in_the_synth_vision_layout(tmp_path):
    files = write_llava(tmp_path / "llava", images=5)
    cfg = LlavaDataConfig(**files, mme_folder=write_mme(tmp_path / "mme", per_task=3), image_size=24, max_instruct=4)
    data = import_llava(cfg)
    train = data["train"]
    assert train["images"].shape == (5, 24, 24, 3) and train["images"].dtype == np.uint8
    assert train["captions"][2] == "a red square on the left of the image 2"
    assert len(train["conversations"]) == 4 and train["instruct_images"] == [0, 1, 2, 3]   # text-only skipped
    assert train["conversations"][0][0] == {"role": "user", "content": "Is there a red square in the image?"}
    # padded to a square: the wide images' top and bottom rows are the CLIP mean colour
    assert (train["images"][1][0, 12] == (122, 116, 104)).all()
    questions = data["mme"]["questions"]
    assert len(questions) == 12 and data["mme"]["images"].shape == (6, 24, 24, 3)
    assert {q["image"] for q in questions if q["task"] == "scene"} == {f"scene/images/{i:04d}.jpg" for i in range(3)}
    assert [q["answer"] for q in questions[:2]] == ["yes", "no"] and questions[1]["index"] == questions[0]["index"]


def test_damaged_real_vision_inputs_are_one_line(tmp_path):
    files = write_llava(tmp_path / "llava", images=2)
    mme = write_mme(tmp_path / "mme", per_task=1)
    (tmp_path / "llava" / "images" / "coco" / "001.png").write_bytes(b"not a png")
    with pytest.raises(InputError, match=r"001.png: unreadable"):
        import_llava(LlavaDataConfig(**files, mme_folder=mme))
    (tmp_path / "mme" / "existence" / "0000.txt").write_text("Is it? yes\n")
    with pytest.raises(InputError, match=r"0000.txt: expected two lines question<TAB>yes\|no"):
        load_mme_release(mme)
    with pytest.raises(InputError, match="MME folder not found"):
        load_mme_release(tmp_path / "nowhere")
