"""``synth_vision``: procedurally drawn scenes for the LIA-MTR reproduction, deterministic by seed, whose MME-style
questions need the whole image: each answer is a relation between objects that sit in different patches, so no
single patch decides it (issue 49).

A scene is 3 to ``max_objects`` objects (a shape and a colour each, no two alike) spread from left to right over
a tinted, noisy background; their heights from left to right follow a layout (a level row, rising, falling, an
arch). The five categories keep MME's names; the synthetic rule behind each (:data:`RULES`):

- existence: "is there a redcircle" (one word per colour-shape pair): some object is both red and a circle. The false
  question names a colour
  and a shape that are both in the image, never on one object (colour and shape alone do not decide it).
- count: "are there two circles": the number of objects of one shape across the image (1 to 3, uniform).
- position: "is the redcircle left of the bluesquare": two named objects, one in the left third of the image,
  the other in the right third (at least a third of the image apart); the false question swaps them.
- color: "is the leftmost object red": the colour of the object at one end, which only comparing every object's
  position finds; the false question names the colour of the nearest object of another colour.
- scene: "is this an arch scene": the layout, the heights of all the objects in their left-to-right order.

From its attributes come, worded by a phrasing (:mod:`relin.data.vision.phrasing`: terse for the tiny chat LLM, plain
English for a pretrained one), a caption (phase 1) that states every fact a question asks (objects left to right with
the third each sits in, the count of each shape, the layout), a conversation (phase 2: an open question and a yes/no
question), the yes/no pairs of every category about it (``qa``: what the chat LLM learns to answer from the caption in
text) and, for the MME-style set, two yes/no questions of one category, one true and one false as MME pairs them, in
an order drawn per image (a model that answers by position in the pair scores chance). Each question's words are drawn
alike for its true and false form, so the question alone decides nothing.
"""
from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass

import numpy as np

from .attributes import COLOURS, ENDS, LAYOUTS, SHAPES, THIRDS
from .phrasing import get_phrasing

RELATIONS = ("left", "right")
# Background tints (no question asks about them; one patch decides them: the per-patch probe's control).
BACKGROUNDS = ((200, 200, 200), (70, 70, 80), (185, 215, 185), (185, 200, 230))
MAX_COUNT = 3
# Pixels of vertical jitter a level row keeps (each object ±1).
LEVEL = 2
CATEGORIES = ("existence", "count", "position", "color", "scene")
# The synthetic rule behind each of MME's category names (the report's Table I note and docs/papers/lia_mtr.md).
RULES = {
    "existence": "is there a <colour><shape>: some object has both; the false question names a colour and a shape "
                 "that are both in the image, never on one object",
    "count": "are there <n> <shape>s: the number of objects of that shape across the image (1-3, uniform)",
    "position": "is the <A> left (right) of the <B> (each a <colour><shape>): two named objects, one in the left third "
                "of the image and one in the right third; the false question swaps them",
    "color": "is the leftmost (rightmost) object <colour>: the colour of the object at that end, found by comparing "
             "every object's position; the false question names the colour of the nearest object of another colour",
    "scene": "is this a <layout> scene: the objects' heights from left to right (row: level; rising; falling; arch: "
             "the middle ones higher)",
}


@dataclass(frozen=True)
class Thing:
    """One object: its shape, colour and top-left corner in pixels."""

    shape: str
    colour: str
    x: int
    y: int

    @property
    def name(self) -> str:
        """One word per colour-shape pair ("redcircle"): a caption and a question name an object by one token, so
        the tiny chat LLM matches objects by a word, not by binding two (it did not learn the binding in its
        budget: docs/papers/lia_mtr.md)."""
        return f"{self.colour}{self.shape}"


@dataclass(frozen=True)
class Scene:
    """A drawn scene: ``objects`` in left-to-right order, the ``focus`` shape its count questions ask about."""

    layout: str
    objects: tuple[Thing, ...]
    focus: str
    background: int
    size: int

    @classmethod
    def from_dict(cls, d: dict) -> "Scene":
        return cls(layout=d["layout"], objects=tuple(Thing(**o) for o in d["objects"]), focus=d["focus"],
                   background=int(d["background"]), size=int(d["size"]))

    def third(self, thing: Thing) -> str:
        """The horizontal third of the image the object's centre lies in."""
        centre = thing.x + object_size(self.size) / 2
        return THIRDS[min(2, int(3 * centre / self.size))]

    def count(self, shape: str) -> int:
        return sum(o.shape == shape for o in self.objects)


def object_size(size: int) -> int:
    """An object's side in pixels: 6 at 32 (1.5 patches of 4), in proportion above."""
    return max(4, size * 3 // 16)


def _rng(seed: int, stream: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(stream.encode())])


def _centres(rng: np.random.Generator, n: int, size: int, obj: int) -> list[int]:
    """Left edges of ``n`` objects, ascending, at least one pixel apart, the first in the left third and the last
    in the right third (so every scene has a pair for the position questions). The free pixels are split into
    n + 1 gaps uniformly (stars and bars)."""
    slack = size - obj - (n - 1) * (obj + 1)
    if slack < 0:
        raise ValueError(f"{n} objects of {obj} pixels do not fit side by side in {size} pixels")
    while True:
        cuts = np.sort(rng.integers(0, slack + 1, size=n))
        xs = [int(c) + i * (obj + 1) for i, c in enumerate(cuts)]
        if xs[0] + obj / 2 < size / 3 and xs[-1] + obj / 2 >= 2 * size / 3:
            return xs


def _heights(rng: np.random.Generator, layout: str, n: int, size: int, obj: int) -> list[int]:
    """Top edges by the layout (image rows grow downwards: rising means a smaller y to the right). The drop between
    the highest and the lowest object is a quarter to 40% of the free height and the group sits at a uniform
    height, so that where one object is says little about the layout (the per-patch probe's precondition)."""
    top = size - obj
    if layout == "row":
        y = int(rng.integers(0, top + 1))
        return [int(np.clip(y + j, 0, top)) for j in rng.integers(-LEVEL // 2, LEVEL // 2 + 1, size=n)]
    span = int(rng.integers(round(0.25 * top), round(0.4 * top) + 1))
    low = int(rng.integers(span, top + 1))                      # y of the lowest object
    if layout == "rising":
        return [low - round(span * i / (n - 1)) for i in range(n)]
    if layout == "falling":
        return [low - span + round(span * i / (n - 1)) for i in range(n)]
    if layout == "arch":
        return [low if i in (0, n - 1) else low - span for i in range(n)]
    raise ValueError(f"layout: expected one of {', '.join(LAYOUTS)}, got {layout!r}")


def random_scene(rng: np.random.Generator, max_objects: int, size: int) -> Scene:
    """A scene with every category askable: a count of the focus shape drawn uniformly from 1 to 3, at least two
    shapes and two colours, and a colour-shape pair for the false existence question."""
    obj = object_size(size)
    while True:
        k = int(rng.integers(1, MAX_COUNT + 1))     # n > k: at least one object of another shape
        n = int(rng.integers(max(3, k + 1), max_objects + 1))
        focus = str(rng.choice(SHAPES))
        others = [s for s in SHAPES if s != focus]
        shapes = [focus] * k + [str(rng.choice(others)) for _ in range(n - k)]
        colours = []
        for shape in shapes:
            taken = {c for c, s in zip(colours, shapes) if s == shape}
            free = [c for c in COLOURS if c not in taken]
            if not free:
                break
            colours.append(str(rng.choice(free)))
        if len(colours) < n or len(set(colours)) < 2:
            continue
        order = rng.permutation(n)
        layout = str(rng.choice(LAYOUTS))
        xs, ys = _centres(rng, n, size, obj), _heights(rng, layout, n, size, obj)
        things = tuple(Thing(shapes[i], colours[i], x, y) for i, x, y in zip(order, xs, ys))
        scene = Scene(layout, things, focus, int(rng.integers(0, len(BACKGROUNDS))), size)
        if _absent_pairs(scene):
            return scene


def _mask(shape: str, obj: int) -> np.ndarray:
    yy, xx = np.mgrid[0:obj, 0:obj].astype(np.float32)
    c = (obj - 1) / 2
    return {"square": np.ones((obj, obj), bool),
            "circle": (yy - c) ** 2 + (xx - c) ** 2 <= (obj / 2) ** 2,
            "triangle": np.abs(xx - c) <= yy / 2 + 0.5}[shape]


def draw(scene: Scene, size: int, rng: np.random.Generator) -> np.ndarray:
    """The image of ``scene``: ``[size, size, 3]`` uint8."""
    obj = object_size(size)
    image = np.empty((size, size, 3), dtype=np.float32)
    image[:] = np.array(BACKGROUNDS[scene.background], dtype=np.float32)
    dots = rng.random((size, size)) < 0.04
    image[dots] = image[dots] * 0.7 + 40
    image += rng.normal(0, 6, image.shape)
    for thing in scene.objects:
        patch = image[thing.y:thing.y + obj, thing.x:thing.x + obj]
        patch[_mask(thing.shape, obj)] = np.array(COLOURS[thing.colour], dtype=np.float32)
    return np.clip(image, 0, 255).astype(np.uint8)


def caption(s: Scene, phrasing: str = "terse") -> str:
    """Every fact a question asks: the layout, the objects left to right each with its third, the colour at each
    end, the count of each shape present, in ``phrasing``'s words (the terse one, e.g. ``rising scene redcircle
    left bluesquare middle yellowcircle right two circles one square``: a tiny LLM finds a fact sooner in a short
    caption)."""
    return get_phrasing(phrasing).caption(s)


# --- the rules: each category's answer from the scene's objects -------------------------------------------------

def exists(s: Scene, colour: str, shape: str) -> bool:
    return any(t.colour == colour and t.shape == shape for t in s.objects)


def left_of(s: Scene, a: str, b: str) -> bool:
    """Whether the object named ``a`` ("redcircle") lies left of the one named ``b``."""
    things = {t.name: t for t in s.objects}
    return things[a].x < things[b].x


def end_colour(s: Scene, end: str) -> str:
    """The colour of the leftmost or rightmost object (by position, whatever order ``objects`` is in)."""
    pick = min if end == "leftmost" else max
    return pick(s.objects, key=lambda t: t.x).colour


def layout_of(s: Scene) -> str:
    """The layout from the objects' heights, left to right (the rule the drawing follows): level within the
    jitter (row), each higher than the last (rising) or lower (falling), both ends lower than every middle one
    (arch); else none."""
    ys = [t.y for t in sorted(s.objects, key=lambda t: t.x)]   # image rows: a smaller y is higher
    if max(ys) - min(ys) <= LEVEL:
        return "row"
    if all(b < a for a, b in zip(ys, ys[1:])):
        return "rising"
    if all(b > a for a, b in zip(ys, ys[1:])):
        return "falling"
    if min(ys[0], ys[-1]) > max(ys[1:-1]) + LEVEL:
        return "arch"
    return "none"


def _absent_pairs(s: Scene) -> list[tuple[str, str]]:
    """Colour-shape pairs whose colour and shape are both in the image, never on one object."""
    colours = sorted({t.colour for t in s.objects}, key=list(COLOURS).index)
    shapes = sorted({t.shape for t in s.objects}, key=SHAPES.index)
    return [(c, sh) for c in colours for sh in shapes if not exists(s, c, sh)]


def yes_no_pair(s: Scene, category: str, rng: np.random.Generator,
                phrasing: str = "terse") -> list[tuple[str, str]]:
    """Two ``(question, answer)`` of ``category`` about ``s``: the true one (yes), then a false one (no), in
    ``phrasing``'s words (the draws do not depend on it)."""
    words = get_phrasing(phrasing)
    if category == "existence":
        true = s.objects[int(rng.integers(0, len(s.objects)))]
        pairs = _absent_pairs(s)
        colour, shape = pairs[int(rng.integers(0, len(pairs)))]
        return [(words.exists(true.colour, true.shape), "yes"), (words.exists(colour, shape), "no")]
    if category == "count":
        k = s.count(s.focus)
        wrong = int(rng.choice([n for n in range(1, MAX_COUNT + 1) if n != k]))
        return [(words.count(k, s.focus), "yes"), (words.count(wrong, s.focus), "no")]
    if category == "position":
        lefts = [t for t in s.objects if s.third(t) == "left"]
        rights = [t for t in s.objects if s.third(t) == "right"]
        a, b = lefts[int(rng.integers(0, len(lefts)))], rights[int(rng.integers(0, len(rights)))]
        if rng.integers(0, 2):      # "right of" as often as "left of": the relation word decides nothing
            return [(words.relation(b, "right", a), "yes"), (words.relation(a, "right", b), "no")]
        return [(words.relation(a, "left", b), "yes"), (words.relation(b, "left", a), "no")]
    if category == "color":
        end = ENDS[int(rng.integers(0, 2))]
        colour = end_colour(s, end)
        inward = sorted(s.objects, key=lambda t: t.x, reverse=end == "rightmost")
        # the nearest object of another colour: where one patch sees either colour says least about the answer
        wrong = next(t.colour for t in inward if t.colour != colour)
        return [(words.end_colour(end, colour), "yes"), (words.end_colour(end, wrong), "no")]
    if category == "scene":
        wrong = [layout for layout in LAYOUTS if layout != s.layout]
        return [(words.layout(s.layout), "yes"), (words.layout(wrong[int(rng.integers(0, len(wrong)))]), "no")]
    raise ValueError(f"category: expected one of {', '.join(CATEGORIES)}, got {category!r}")


def open_questions(s: Scene, rng: np.random.Generator, phrasing: str = "terse") -> list[tuple[str, str]]:
    """One open question per fact the yes/no categories compare: the layout (scene), the count of the focus
    shape (count), the colour of an end object (color), the third a named object sits in (position), the object
    at an end (existence's colour-shape pairs)."""
    end = ENDS[int(rng.integers(0, 2))]
    named = s.objects[int(rng.integers(0, len(s.objects)))]
    return get_phrasing(phrasing).open_questions(s, end, named)


def open_question(s: Scene, rng: np.random.Generator, phrasing: str = "terse") -> tuple[str, str]:
    questions = open_questions(s, rng, phrasing)
    return questions[int(rng.integers(0, len(questions)))]


def conversation(s: Scene, rng: np.random.Generator, phrasing: str = "terse") -> list[dict[str, str]]:
    """Phase 2: an open question and one of an MME-category yes/no pair (either answer), in either order.

    The order is drawn because MME asks its yes/no question as the first turn, right after the image: a
    set whose yes/no questions all come second leaves that prompt out of the training distribution.
    """
    question, answer = open_question(s, rng, phrasing)
    category = str(rng.choice(CATEGORIES))
    yn_question, yn_answer = yes_no_pair(s, category, rng, phrasing)[int(rng.integers(0, 2))]
    turns = [(question, answer), (yn_question, yn_answer)]
    if rng.integers(0, 2):
        turns.reverse()
    return [message for q, a in turns for message in ({"role": "user", "content": q},
                                                      {"role": "assistant", "content": a})]


def vocabulary(phrasing: str = "terse") -> list[str]:
    """Every word the captions, questions and answers in ``phrasing`` use."""
    return get_phrasing(phrasing).words()


def generate(cfg) -> dict:
    """Images and text of every split from :class:`~relin.config.lia_mtr.SynthVisionConfig`.

    Returns ``{"train": {"images": [N, H, W, 3] uint8, "scenes", "captions", "conversations", "qa", "open"},
    "mme": {"images", "scenes", "captions", "questions": [{"task", "image", "question", "answer"}]},
    "phrasing": name}``, the text worded by ``cfg.phrasing`` (the images and every draw do not depend on it).
    """
    words = cfg.phrasing
    rng = _rng(cfg.seed, "train")
    scenes = [random_scene(rng, cfg.max_objects, cfg.image_size) for _ in range(cfg.train_images)]
    images = np.stack([draw(s, cfg.image_size, rng) for s in scenes])
    train = {"images": images, "scenes": [asdict(s) for s in scenes],
             "captions": [caption(s, words) for s in scenes],
             "conversations": [conversation(s, rng, words) for s in scenes]}
    qa_rng = _rng(cfg.seed, "qa")
    train["qa"] = [[{"task": category, "question": q, "answer": a} for category in CATEGORIES
                    for q, a in yes_no_pair(s, category, qa_rng, words)] for s in scenes]
    train["open"] = [[{"question": q, "answer": a} for q, a in open_questions(s, qa_rng, words)] for s in scenes]
    rng = _rng(cfg.seed, "mme")
    mme_scenes, mme_images, mme_captions, questions = [], [], [], []
    for category in CATEGORIES:
        for i in range(cfg.mme_images_per_category):
            s = random_scene(rng, cfg.max_objects, cfg.image_size)
            name = f"{category}_{i:04d}.png"
            mme_scenes.append(asdict(s))
            mme_captions.append(caption(s, words))
            mme_images.append(draw(s, cfg.image_size, rng))
            pair = yes_no_pair(s, category, rng, words)
            if rng.integers(0, 2):
                pair.reverse()
            questions += [{"task": category, "image": name, "index": len(mme_images) - 1, "question": q, "answer": a}
                          for q, a in pair]
    return {"train": train, "mme": {"images": np.stack(mme_images), "scenes": mme_scenes, "captions": mme_captions,
                                    "questions": questions}, "phrasing": words}
