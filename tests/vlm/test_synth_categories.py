"""The MME-style categories of the drawn scenes need the whole image (issue 49): each answer is a function of two or
more objects' attributes, no single patch decides it (the per-patch linear probe on pixels stays near chance, while
it decides the background tint that every patch shows), the question alone decides nothing, and the caption states
every answer (a rule-based reader of the caption answers every question)."""
import re
from dataclasses import replace

import numpy as np
import pytest

from relin.config.lia_mtr import SynthVisionConfig
from relin.data.vision import synth
from relin.data.vision.synth import CATEGORIES, Scene, Thing
from relin.errors import ConfigError
from relin.eval import patch_probe


@pytest.fixture(scope="module")
def data():
    return synth.generate(SynthVisionConfig(train_images=1200, mme_images_per_category=4))


def scenes(data) -> list[Scene]:
    return [Scene.from_dict(s) for s in data["train"]["scenes"]]


def read_caption(caption: str, question: str) -> str:
    """Answer ``question`` from ``caption`` alone, by rule: what the chat LLM must learn (the caption suffices)."""
    words = caption.split()
    layout, rest = words[0], words[2:]
    split = next(i for i, w in enumerate(rest) if w in synth.COUNT_WORDS)
    things = [(rest[i], rest[i + 1]) for i in range(0, split, 2)]
    names = [name for name, _ in things]
    where = dict(things)
    stated = {rest[i + 1].rstrip("s"): rest[i] for i in range(split, len(rest), 2)}
    q = question.removesuffix(f" ? {synth.PROMPT_SUFFIX}")
    if m := re.fullmatch(r"is there a (\w+)", q):
        return "yes" if m[1] in names else "no"
    if m := re.fullmatch(r"are there (\w+) (\w+)", q):
        return "yes" if stated.get(m[2].rstrip("s")) == m[1] else "no"
    if m := re.fullmatch(r"is the (\w+) (left|right) of the (\w+)", q):
        first = "left" if where[m[1]] == "left" else "right"      # a third apart: one on each side
        return "yes" if first == m[2] else "no"
    if m := re.fullmatch(r"is the (leftmost|rightmost) object (\w+)", q):
        end = names[0] if m[1] == "leftmost" else names[-1]       # listed left to right
        return "yes" if end.startswith(m[2]) else "no"
    if m := re.fullmatch(r"is this a (\w+) scene", q):
        return "yes" if m[1] == layout else "no"
    raise AssertionError(f"unexpected question {question!r}")


def test_the_caption_states_every_answer(data):
    """A reader of the caption alone answers every question of every category, in training and in the MME set."""
    train = data["train"]
    for caption, qa in zip(train["captions"], train["qa"]):
        for item in qa:
            assert read_caption(caption, item["question"]) == item["answer"], (caption, item)
    mme = data["mme"]
    for q in mme["questions"]:
        assert read_caption(synth.caption(Scene.from_dict(mme["scenes"][q["index"]])), q["question"]) == q["answer"]


def _move(scene: Scene, i: int, **change) -> Scene:
    things = list(scene.objects)
    things[i] = replace(things[i], **change)
    return replace(scene, objects=tuple(things))


def test_each_answer_is_a_function_of_two_or_more_objects(data):
    """For each category, changing an object other than the one a question names first (or, for existence and
    count, any other object) flips the answer in some scene: no answer reads one object alone."""
    flips = dict.fromkeys(CATEGORIES, 0)
    for s in scenes(data)[:200]:
        a, b = s.objects[0], s.objects[-1]
        # existence: the absent pair becomes present when another object takes it
        colour, shape = synth._absent_pairs(s)[0]
        flips["existence"] += synth.exists(_move(s, 1, colour=colour, shape=shape), colour, shape) != \
            synth.exists(s, colour, shape)
        # count: another object of the asked shape changes the count
        other = next(i for i, t in enumerate(s.objects) if t.shape != s.focus)
        flips["count"] += _move(s, other, shape=s.focus).count(s.focus) != s.count(s.focus)
        # position: moving the second-named object across the first flips "a left of b"
        flips["position"] += synth.left_of(_move(s, len(s.objects) - 1, x=a.x - 1), a.name, b.name) != \
            synth.left_of(s, a.name, b.name)
        # color: another object moved past the leftmost one becomes the leftmost
        far = next((i for i, t in enumerate(s.objects) if t.colour != a.colour), None)
        if far is not None:
            flips["color"] += synth.end_colour(_move(s, far, x=a.x - 1), "leftmost") != synth.end_colour(s, "leftmost")
        # scene: one object's height changes the layout
        flips["scene"] += synth.layout_of(_move(s, 1, y=(s.objects[1].y + s.size // 2) % (s.size - 6))) != \
            synth.layout_of(s)
    assert all(n > 50 for n in flips.values()), flips


def test_the_drawn_layout_is_the_rule_of_the_objects_heights(data):
    assert all(synth.layout_of(s) == s.layout for s in scenes(data))


def test_every_scene_has_a_left_and_a_right_object_and_counts_spread_evenly(data):
    counts = np.bincount([s.count(s.focus) for s in scenes(data)], minlength=4)[1:]
    assert counts.min() > 0.25 * counts.sum(), counts
    for s in scenes(data):
        assert s.third(s.objects[0]) == "left" and s.third(s.objects[-1]) == "right"
        assert len({t.name for t in s.objects}) == len(s.objects) and len({t.shape for t in s.objects}) > 1


def _rows(data) -> list[dict]:
    train = data["train"]
    rows = [dict(q, index=i) for i, qa in enumerate(train["qa"]) for q in qa]
    return rows + patch_probe.control_rows(train["scenes"], len(synth.BACKGROUNDS))


def test_no_single_patch_decides_a_category_but_one_patch_decides_the_control(data):
    """The per-patch linear probe on each patch's pixels: every category at most 60% (chance 50%), the background
    tint at least 90% (the probe can read what one patch holds)."""
    features = patch_probe.pixel_patches(data["train"]["images"], 4)
    results = patch_probe.probe_categories(features, _rows(data), steps=50)
    for task in CATEGORIES:
        assert results[task]["accuracy"] <= 0.6, (task, results[task])
    assert results[patch_probe.CONTROL]["accuracy"] >= 0.9, results[patch_probe.CONTROL]


def test_the_question_alone_decides_nothing(data):
    """The same probe with blank features reads only the question's words: chance for every category."""
    blank = np.zeros((len(data["train"]["images"]), 1, 1), dtype=np.float32)
    import torch

    results = patch_probe.probe_categories(torch.from_numpy(blank), [r for r in _rows(data) if r["task"] in CATEGORIES],
                                           steps=50)
    assert all(r["accuracy"] <= 0.6 for r in results.values()), results


def test_the_mme_set_pairs_a_yes_and_a_no_per_image_of_each_category(data):
    mme = data["mme"]
    tasks = [q["task"] for q in mme["questions"]]
    assert all(tasks.count(c) == 8 for c in CATEGORIES)
    for i in range(0, len(mme["questions"]), 2):
        a, b = mme["questions"][i:i + 2]
        assert a["image"] == b["image"] and {a["answer"], b["answer"]} == {"yes", "no"}


def test_too_many_objects_for_the_image_is_a_config_error():
    from relin.config.loader import build

    with pytest.raises(ConfigError, match="max_objects"):
        build(SynthVisionConfig, {"image_size": 32, "max_objects": 5}, "lia_mtr.data")
    assert build(SynthVisionConfig, {"image_size": 64, "max_objects": 5}, "lia_mtr.data").max_objects == 5


def test_objects_are_drawn_where_the_scene_says():
    rng = np.random.default_rng(0)
    s = synth.random_scene(rng, 4, 32)
    image = synth.draw(s, 32, rng)
    for t in s.objects:
        centre = image[t.y + 3, t.x + 3].astype(int)
        assert np.abs(centre - np.array(synth.COLOURS[t.colour])).max() < 40, (t, centre)
    assert isinstance(s.objects[0], Thing)
