"""lm-evaluation-harness on the hybrid through its Hugging Face model class, on local task files (no network):
the harness's loglikelihoods are the hybrid's own, its generation task scores what the hybrid's cached greedy
decoding produces, and ``relin opal-lm-eval`` writes the scores the harness computed."""
import json

import pytest
import torch

from relin.cli import main
from relin.config.opal import SWAConfig
from relin.config.teacher import TeacherModelConfig
from relin.data.tokenizer import load_tokenizer
from relin.eval.harness import harness_lm, run_tasks
from relin.models.convert.opal import convert
from relin.models.generation import generate
from relin.models.teachers import build_teacher, load_pretrained

from ..train.toydata import KEYS, VALUES, word_tokenizer

TEACHER = TeacherModelConfig(family="qwen3", hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                             num_key_value_heads=2, head_dim=16, intermediate_size=64)
CHOICE_TASK = """task: relin_local_choice
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
"""
RECALL_TASK = """task: relin_local_recall
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["<eos>"]
  max_gen_toks: 2
  do_sample: false
metric_list:
  - metric: exact_match
"""


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("RELIN_TRACKING", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="module")
def hybrid_dir(tmp_path_factory):
    """A tiny Qwen3 teacher converted to a hybrid with GDN, SWA and attention layers, saved with its tokenizer."""
    tokenizer = word_tokenizer()
    model = convert(build_teacher(TEACHER, tokenizer, seed=0), ["gdn", "swa", "gdn", "attention"],
                    swa=SWAConfig(window=5, sinks=2)).eval()
    path = tmp_path_factory.mktemp("hybrid")
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    """Two local tasks in the harness's YAML format over JSON-lines files of the toy vocabulary."""
    folder = tmp_path_factory.mktemp("tasks")
    g = torch.Generator().manual_seed(0)

    def words(pool, n):
        return [pool[i] for i in torch.randint(len(pool), (n,), generator=g).tolist()]

    choice = [{"question": " ".join(words(KEYS + VALUES, 3 + i % 4)), "choices": words(VALUES, 3),
               "answer": i % 3} for i in range(9)]
    recall = [{"question": " ".join(words(KEYS, 2 + i % 3)), "answer": words(VALUES, 1)[0]} for i in range(7)]
    for name, docs, template in (("choice", choice, CHOICE_TASK), ("recall", recall, RECALL_TASK)):
        data = folder / f"{name}.jsonl"
        data.write_text("".join(json.dumps(doc) + "\n" for doc in docs))
        (folder / f"{name}.yaml").write_text(template.format(data=data))
    return folder, choice, recall


def continuation_logprob(model, tokenizer, context: str, continuation: str) -> float:
    """log p(continuation | context) from one forward, the continuation's tokens cut from the joint encoding."""
    context_ids = tokenizer(context, add_special_tokens=False)["input_ids"]
    ids = tokenizer(context + continuation, add_special_tokens=False)["input_ids"]
    target = ids[len(context_ids):]
    with torch.no_grad():
        logits = model(torch.tensor([ids[:-1]])).logits[0, -len(target):].float()
    return logits.log_softmax(-1).gather(-1, torch.tensor(target)[:, None]).sum().item()


def test_harness_scores_are_the_hybrids_own(hybrid_dir, tasks):
    folder, choice, recall = tasks
    model, tokenizer = load_pretrained(str(hybrid_dir)).eval(), load_tokenizer(hybrid_dir)
    out = run_tasks(harness_lm(model, tokenizer, batch_size=4, max_length=0), ["relin_local_choice",
                    "relin_local_recall"], include_path=str(folder), log_samples=True)
    assert out["n_samples"] == {"relin_local_choice": len(choice), "relin_local_recall": len(recall)}
    picks = []
    for sample in sorted(out["samples"]["relin_local_choice"], key=lambda s: s["doc_id"]):
        doc = choice[sample["doc_id"]]
        ours = [continuation_logprob(model, tokenizer, doc["question"], " " + c) for c in doc["choices"]]
        theirs = [resp[0][0] for resp in sample["resps"]]
        assert theirs == pytest.approx(ours, abs=1e-4)
        picks.append(max(range(3), key=ours.__getitem__) == doc["answer"])
    assert out["results"]["relin_local_choice"]["acc"] == pytest.approx(sum(picks) / len(picks))
    for sample in out["samples"]["relin_local_recall"]:
        doc = recall[sample["doc_id"]]
        ids = torch.tensor([tokenizer(doc["question"], add_special_tokens=False)["input_ids"]])
        greedy = generate(model, ids, 2, eos_token_id=tokenizer.eos_token_id)[0].tolist()
        assert sample["resps"][0][0].split() == tokenizer.decode(greedy, skip_special_tokens=True).split()


def test_stage_writes_the_harness_scores_offline(hybrid_dir, tasks, tmp_path):
    folder, choice, _ = tasks
    config = {"opal.lm_eval": {"tasks": ["relin_local_choice", "relin_local_recall"], "include_path": str(folder),
                               "batch_size": 2, "limit": 5}}
    out = tmp_path / "onpolicy.json"
    assert main(["opal-lm-eval", "--config", json.dumps(config), "--model", str(hybrid_dir), "--name", "onpolicy",
                 "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["name"] == "onpolicy" and result["n_samples"] == {"relin_local_choice": 5, "relin_local_recall": 5}
    assert 0 <= result["results"]["relin_local_choice"]["acc"] <= 1
    assert 0 <= result["results"]["relin_local_recall"]["exact_match"] <= 1


def test_an_unknown_task_is_one_line(hybrid_dir, tmp_path, capsys):
    config = {"opal.lm_eval": {"tasks": ["no_such_task"]}}
    assert main(["opal-lm-eval", "--config", json.dumps(config), "--model", str(hybrid_dir), "--name", "x",
                 "--out", str(tmp_path / "x.json")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and "no_such_task" in errors[0] and not (tmp_path / "x.json").exists()


def test_an_unknown_model_name_is_refused_by_the_config():
    from relin.config.loader import ConfigError, build
    from relin.config.opal import LMEvalConfig

    with pytest.raises(ConfigError, match=r"opal.lm_eval.models: unknown \['student'\]"):
        build(LMEvalConfig, {"tasks": ["gsm8k"], "models": ["teacher", "student"]}, "opal.lm_eval")
