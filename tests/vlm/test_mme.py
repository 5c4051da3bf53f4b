"""MME scoring as the official eval_tool/calculation.py, on a hand-worked example; the real-format loaders."""
import json

import pytest

from relin.data.vision.loaders import load_llava_json, load_mme_questions
from relin.errors import InputError
from relin.eval.mme import MMEAnswer, parse_answer, score_results_dir, score_subtask, write_results_file


@pytest.mark.parametrize("pred,label", [("yes", "yes"), ("No", "no"), ("Yes, there is.", "yes"),
                                        ("no.", "no"), ("nope", "no"), ("not sure", "no"), ("I think yes", "other"),
                                        ("", "other"), ("maybe", "other"), (" yes", "yes"),
                                        ("The answer is no", "other")])
def test_official_yes_no_parsing(pred, label):
    assert parse_answer(pred) == label


def test_hand_worked_example(tmp_path):
    # existence: img a both right; img b one right ("other" for the second) -> acc 3/4, acc+ 1/2 -> 125.0
    existence = [MMEAnswer("a.jpg", "q1", "Yes", "Yes"), MMEAnswer("a.jpg", "q2", "No", "no"),
                 MMEAnswer("b.jpg", "q1", "Yes", "yes, it is"), MMEAnswer("b.jpg", "q2", "No", "unclear")]
    # count: three images, answers right 2, 0, 1 -> acc 3/6, acc+ 1/3 -> 50 + 33.33 = 83.33
    count = [MMEAnswer("c.jpg", "q", "yes", "yes"), MMEAnswer("c.jpg", "q", "no", "no"),
             MMEAnswer("d.jpg", "q", "yes", "no"), MMEAnswer("d.jpg", "q", "no", "yes"),
             MMEAnswer("e.jpg", "q", "yes", "yes"), MMEAnswer("e.jpg", "q", "no", "yes")]
    # code_reasoning (cognition): one image, both wrong -> 0
    code = [MMEAnswer("f.png", "q", "yes", "no"), MMEAnswer("f.png", "q", "no", "yes")]
    for task, answers in (("existence", existence), ("count", count), ("code_reasoning", code)):
        write_results_file(tmp_path / f"{task}.txt", answers)
    scores = score_results_dir(tmp_path)
    assert scores["subtasks"]["existence"]["acc"] == 0.75 and scores["subtasks"]["existence"]["acc_plus"] == 0.5
    assert scores["subtasks"]["existence"]["score"] == pytest.approx(125.0)
    assert scores["subtasks"]["existence"]["other"] == 1
    assert scores["subtasks"]["count"]["score"] == pytest.approx(50 + 100 / 3)
    assert scores["perception"] == pytest.approx(125.0 + 50 + 100 / 3)
    assert scores["cognition"] == 0.0
    assert "scene" in scores["missing"]


def test_pairs_must_share_an_image():
    with pytest.raises(InputError, match="different images"):
        score_subtask([MMEAnswer("a", "q", "yes", "yes"), MMEAnswer("b", "q", "no", "no")], "existence")


def test_mme_score_cli(tmp_path, capsys):
    from relin.cli import main

    write_results_file(tmp_path / "scene.txt", [MMEAnswer("a", "q", "yes", "yes"), MMEAnswer("a", "q", "no", "no")])
    assert main(["mme-score", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "total score: 200.00" in out and "scene  score: 200.00" in out
    assert main(["mme-score", str(tmp_path / "missing")]) == 2


def test_load_mme_questions(tmp_path):
    (tmp_path / "existence.txt").write_text("1.jpg\tIs there a dog?\tYes\n1.jpg\tIs there a cat?\tNo\n")
    (tmp_path / "color.txt").write_text("2.jpg\tIs it red?\tyes\n2.jpg\tIs it blue?\tno\n")
    qs = load_mme_questions(tmp_path)
    assert [(q.task, q.image, q.answer) for q in qs] == [("color", "2.jpg", "yes"), ("color", "2.jpg", "no"),
                                                         ("existence", "1.jpg", "yes"), ("existence", "1.jpg", "no")]
    (tmp_path / "count.txt").write_text("3.jpg\tTwo?\tyes\n4.jpg\tThree?\tno\n")
    with pytest.raises(InputError, match="two questions per image"):
        load_mme_questions(tmp_path, ["count"])


def test_load_llava_json(tmp_path):
    data = [{"id": "0", "image": "coco/1.jpg", "conversations": [
        {"from": "human", "value": "<image>\nWhat is shown?"}, {"from": "gpt", "value": "A dog."},
        {"from": "human", "value": "What colour?"}, {"from": "gpt", "value": "Brown."}]},
        {"id": "1", "conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}]}]
    path = tmp_path / "llava.json"
    path.write_text(json.dumps(data))
    convs = load_llava_json(path)
    assert convs[0].image == "coco/1.jpg" and convs[0].turns[0] == ("user", "What is shown?")
    assert convs[0].turns[3] == ("assistant", "Brown.") and convs[1].image == ""
    data[0]["conversations"][1]["from"] = "human"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="alternate"):
        load_llava_json(path)


def test_each_image_pairs_one_yes_with_one_no_in_a_drawn_order():
    from relin.config.lia_mtr import SynthVisionConfig
    from relin.data.vision.synth import generate

    cfg = SynthVisionConfig(train_images=2, mme_images_per_category=20, image_size=32)
    questions = generate(cfg)["mme"]["questions"]
    pairs = [questions[i:i + 2] for i in range(0, len(questions), 2)]
    assert all(a["image"] == b["image"] and {a["answer"], b["answer"]} == {"yes", "no"} for a, b in pairs)
    firsts = [a["answer"] for a, _ in pairs]
    assert 0.3 < firsts.count("yes") / len(firsts) < 0.7, "the true question comes first in about half the pairs"


def test_every_training_scene_carries_a_true_and_a_false_question_of_each_category():
    """``train.qa`` (what the chat LLM learns to answer from the caption): per scene and MME category one question
    answered yes and one answered no, and the yes questions name the scene's own attributes (the rules and the
    caption reader: tests/vlm/test_synth_categories.py)."""
    from relin.config.lia_mtr import SynthVisionConfig
    from relin.data.vision.phrasing import COUNT_WORDS
    from relin.data.vision.synth import CATEGORIES, Scene, end_colour, generate

    train = generate(SynthVisionConfig(train_images=30, mme_images_per_category=1))["train"]
    for scene, qa in zip(train["scenes"], train["qa"]):
        scene = Scene.from_dict(scene)
        assert sorted((q["task"], q["answer"]) for q in qa) == sorted((c, a) for c in CATEGORIES for a in ("yes", "no"))
        true = {q["task"]: q["question"] for q in qa if q["answer"] == "yes"}
        assert any(f"there a {t.name} " in true["existence"] for t in scene.objects)
        assert f"{COUNT_WORDS[scene.count(scene.focus)]} {scene.focus}" in true["count"]
        end = "leftmost" if "leftmost" in true["color"] else "rightmost"
        assert true["color"].split()[4] == end_colour(scene, end) and scene.layout in true["scene"].split()
        false = {q["task"]: q["question"] for q in qa if q["answer"] == "no"}
        assert scene.layout not in false["scene"].split() and end_colour(scene, end) not in false["color"].split()


def test_each_answer_is_written_as_scored_and_the_report_reads_those_scores(tmp_path):
    """lia-mtr-eval-mme's items.csv holds each question as the official tool scored it (the parsed answer, right or
    wrong); the report's accuracy and acc+ read from it equal the official scores of the answers files."""
    from relin.eval.mme import ITEM_COLUMNS, read_items_file
    from relin.eval.mme_answers import write_and_score
    from relin.io import atomic_write_csv
    from relin.report.lia_scores import MMEScores

    questions = [{"task": task, "image": f"{task}{i}", "question": "q", "answer": gt}
                 for task in ("existence", "count") for i in range(3) for gt in ("yes", "no")]
    preds = ["Yes", "no", "yes, it is", "unclear", "no", "no", "yes", "No", "no", "yes", "YES", "yes"]
    metrics, items = write_and_score(tmp_path / "instruct", questions, preds)
    assert [(r["answer"], r["correct"]) for r in items[:4]] == [("yes", 1), ("no", 1), ("yes", 1), ("other", 0)]
    atomic_write_csv(tmp_path / "items.csv", items, ITEM_COLUMNS)
    scored = read_items_file(tmp_path / "items.csv")
    assert list(scored) == ["instruct"] and [a.correct for a in scored["instruct"]["count"]] == [True, True, False,
                                                                                                 False, True, False]
    report = MMEScores({"lia_mtr": scored}, resamples=50)
    official = score_results_dir(tmp_path / "instruct")["subtasks"]
    for task in ("existence", "count"):
        assert report.accuracy("lia_mtr", "instruct", task).value == pytest.approx(official[task]["acc"])
    assert metrics["accuracy"] == pytest.approx(100 * report.accuracy("lia_mtr", "instruct").value, abs=0.01)
    assert report.acc_plus("lia_mtr", "instruct").value == pytest.approx(
        (official["existence"]["acc_plus"] + official["count"]["acc_plus"]) / 2)
    assert report.yes_share("lia_mtr", "instruct") == pytest.approx(metrics["yes_share"] / 100)


def test_an_items_file_without_its_columns_is_refused_naming_them(tmp_path):
    from relin.eval.mme import read_items_file

    (tmp_path / "items.csv").write_text("phase,task,image\ninstruct,count,a\n")
    with pytest.raises(InputError, match="items.csv: no column 'answer'"):
        read_items_file(tmp_path / "items.csv")
