"""``synth_vision``: procedurally drawn scenes for the LIA-MTR reproduction, deterministic by seed.

A scene is a background of one of four types (two colour bands and a texture) with 1 to ``max_objects``
objects of one shape and one colour side by side in the left or right half. From its attributes come a
caption (phase 1), a conversation (phase 2: an open question and a yes/no question), the yes/no pairs of
every MME category about it (``qa``: what the chat LLM learns to answer from the caption in text) and, for
the MME-style set, two yes/no questions of one category (existence, count, position, color, scene), one
true and one false as MME pairs them, in an order drawn per image (a model that answers by position in the
pair scores chance, not better).
"""
from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass

import numpy as np

# Backgrounds: (upper band, lower band, texture colour) in RGB.
SCENES = {"beach": ((135, 200, 235), (225, 200, 140), (250, 250, 250)),
          "forest": ((40, 110, 50), (70, 140, 60), (20, 70, 30)),
          "night": ((15, 20, 50), (30, 30, 60), (230, 230, 150)),
          "snow": ((200, 210, 225), (245, 245, 250), (170, 180, 200))}
COLOURS = {"red": (220, 30, 30), "blue": (30, 60, 230), "yellow": (240, 220, 20), "purple": (150, 40, 180)}
SHAPES = ("square", "circle", "triangle")
POSITIONS = ("left", "right")
COUNT_WORDS = ("zero", "one", "two", "three", "four")
CATEGORIES = ("existence", "count", "position", "color", "scene")
PROMPT_SUFFIX = "answer yes or no ."


@dataclass(frozen=True)
class Scene:
    scene: str
    shape: str
    colour: str
    count: int
    position: str


def _rng(seed: int, stream: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(stream.encode())])


def random_scene(rng: np.random.Generator, max_objects: int) -> Scene:
    return Scene(scene=str(rng.choice(list(SCENES))), shape=str(rng.choice(SHAPES)),
                 colour=str(rng.choice(list(COLOURS))), count=int(rng.integers(1, max_objects + 1)),
                 position=str(rng.choice(POSITIONS)))


def draw(scene: Scene, size: int, rng: np.random.Generator) -> np.ndarray:
    """The image of ``scene``: ``[size, size, 3]`` uint8. Objects sit in slots down their half."""
    upper, lower, texture = (np.array(c, dtype=np.float32) for c in SCENES[scene.scene])
    image = np.empty((size, size, 3), dtype=np.float32)
    split = size // 2 + int(rng.integers(-size // 8, size // 8 + 1))
    image[:split], image[split:] = upper, lower
    dots = rng.random((size, size)) < 0.04
    image[dots] = texture
    image += rng.normal(0, 6, image.shape)
    slots = max(scene.count, 3)
    slot_h = size // slots
    obj = max(4, min(size // 2 - 4, slot_h - 2))
    x0 = (2 if scene.position == "left" else size // 2 + 2) + int(rng.integers(0, max(1, size // 2 - obj - 3)))
    rows = rng.choice(slots, scene.count, replace=False)
    yy, xx = np.mgrid[0:obj, 0:obj].astype(np.float32)
    c = (obj - 1) / 2
    mask = {"square": np.ones((obj, obj), bool),
            "circle": (yy - c) ** 2 + (xx - c) ** 2 <= (obj / 2) ** 2,
            "triangle": np.abs(xx - c) <= yy / 2 + 0.5}[scene.shape]
    for row in sorted(rows):
        y0 = int(row) * slot_h + (slot_h - obj) // 2
        patch = image[y0:y0 + obj, x0:x0 + obj]
        patch[mask] = np.array(COLOURS[scene.colour], dtype=np.float32)
    return np.clip(image, 0, 255).astype(np.uint8)


def _plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"


def caption(s: Scene) -> str:
    return f"a {s.scene} scene with {COUNT_WORDS[s.count]} {s.colour} {_plural(s.count, s.shape)} on the {s.position}"


def _other(rng: np.random.Generator, options, value):
    return rng.choice([o for o in options if o != value]).item()


def yes_no_pair(s: Scene, category: str, rng: np.random.Generator, max_objects: int) -> list[tuple[str, str]]:
    """Two ``(question, answer)`` of ``category`` about ``s``: the true one (yes), then a false one (no)."""
    def ask(text: str) -> str:
        return f"{text} ? {PROMPT_SUFFIX}"

    if category == "existence":
        wrong = _other(rng, SHAPES, s.shape)
        return [(ask(f"is there a {s.colour} {s.shape} in the image"), "yes"),
                (ask(f"is there a {s.colour} {wrong} in the image"), "no")]
    if category == "count":
        wrong = int(_other(rng, range(1, max(max_objects, 2) + 1), s.count))
        return [(ask(f"are there {COUNT_WORDS[s.count]} objects in the image"), "yes"),
                (ask(f"are there {COUNT_WORDS[wrong]} objects in the image"), "no")]
    if category == "position":
        return [(ask(f"are the objects on the {s.position}"), "yes"),
                (ask(f"are the objects on the {_other(rng, POSITIONS, s.position)}"), "no")]
    if category == "color":
        return [(ask(f"are the objects {s.colour}"), "yes"),
                (ask(f"are the objects {_other(rng, list(COLOURS), s.colour)}"), "no")]
    if category == "scene":
        return [(ask(f"is this a {s.scene} scene"), "yes"),
                (ask(f"is this a {_other(rng, list(SCENES), s.scene)} scene"), "no")]
    raise ValueError(f"category: expected one of {', '.join(CATEGORIES)}, got {category!r}")


def open_question(s: Scene, rng: np.random.Generator) -> tuple[str, str]:
    kind = int(rng.integers(0, 5))
    return [("what scene is this ?", f"a {s.scene} scene ."),
            ("how many objects are there ?", f"{COUNT_WORDS[s.count]} ."),
            ("what colour are the objects ?", f"{s.colour} ."),
            ("what shape are the objects ?", f"{s.shape} ."),
            ("where are the objects ?", f"on the {s.position} .")][kind]


def conversation(s: Scene, rng: np.random.Generator, max_objects: int) -> list[dict[str, str]]:
    """Phase 2: an open question and one of an MME-category yes/no pair (either answer), in either order.

    The order is drawn because MME asks its yes/no question as the first turn, right after the image: a
    set whose yes/no questions all come second leaves that prompt out of the training distribution.
    """
    question, answer = open_question(s, rng)
    category = str(rng.choice(CATEGORIES))
    yn_question, yn_answer = yes_no_pair(s, category, rng, max_objects)[int(rng.integers(0, 2))]
    turns = [(question, answer), (yn_question, yn_answer)]
    if rng.integers(0, 2):
        turns.reverse()
    return [message for q, a in turns for message in ({"role": "user", "content": q},
                                                      {"role": "assistant", "content": a})]


def vocabulary() -> list[str]:
    """Every word the captions, questions and answers use."""
    words = ["a", "scene", "with", "on", "the", "is", "there", "in", "image", "are", "objects", "this", "what",
             "how", "many", "colour", "shape", "where", "answer", "yes", "or", "no", "user", "assistant", "system"]
    words += [*SCENES, *COLOURS, *SHAPES, *(s + "s" for s in SHAPES), *POSITIONS, *COUNT_WORDS]
    return list(dict.fromkeys(words))


def generate(cfg) -> dict:
    """Images and text of every split from :class:`~relin.config.lia_mtr.SynthVisionConfig`.

    Returns ``{"train": {"images": [N, H, W, 3] uint8, "scenes", "captions", "conversations", "qa"},
    "mme": {"images", "scenes", "questions": [{"task", "image", "question", "answer"}]}}``.
    """
    rng = _rng(cfg.seed, "train")
    scenes = [random_scene(rng, cfg.max_objects) for _ in range(cfg.train_images)]
    images = np.stack([draw(s, cfg.image_size, rng) for s in scenes])
    train = {"images": images, "scenes": [asdict(s) for s in scenes], "captions": [caption(s) for s in scenes],
             "conversations": [conversation(s, rng, cfg.max_objects) for s in scenes]}
    qa_rng = _rng(cfg.seed, "qa")
    train["qa"] = [[{"task": category, "question": q, "answer": a} for category in CATEGORIES
                    for q, a in yes_no_pair(s, category, qa_rng, cfg.max_objects)] for s in scenes]
    rng = _rng(cfg.seed, "mme")
    mme_scenes, mme_images, questions = [], [], []
    for category in CATEGORIES:
        for i in range(cfg.mme_images_per_category):
            s = random_scene(rng, cfg.max_objects)
            name = f"{category}_{i:04d}.png"
            mme_scenes.append(asdict(s))
            mme_images.append(draw(s, cfg.image_size, rng))
            pair = yes_no_pair(s, category, rng, cfg.max_objects)
            if rng.integers(0, 2):
                pair.reverse()
            questions += [{"task": category, "image": name, "index": len(mme_images) - 1, "question": q, "answer": a}
                          for q, a in pair]
    return {"train": train, "mme": {"images": np.stack(mme_images), "scenes": mme_scenes, "questions": questions}}
