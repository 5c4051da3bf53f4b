"""How the drawn scenes are put in words: the caption, the yes/no question of each MME category, the open
questions and the user turn that puts a caption before a question (``lia_mtr.data.phrasing``).

- ``terse``: for the tiny chat LLM trained in the DAG on this text alone: one word per colour-shape pair
  ("redcircle"), lower case, spaced punctuation, no function words it would have to learn to skip (e.g.
  ``rising scene redcircle left bluesquare middle two circles one square``).
- ``plain``: for a pretrained chat LLM read zero-shot: English sentences that state every fact a question asks
  in the words the question uses (e.g. "This is a rising scene. From left to right: a red circle on the left, a
  blue square in the middle. The leftmost object is red and the rightmost object is blue. There is one circle
  and one square."). A pretrained LLM answers "No" to the terse text whatever it asks (issue 65).

Both state the same facts, and the questions of both draw the same objects, colours and counts: the phrasing
changes the words, never what a question asks or its answer (:mod:`relin.data.vision.synth` draws; this words).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .attributes import COLOURS, ENDS, LAYOUTS, SHAPES, THIRDS

if TYPE_CHECKING:
    from .synth import Scene, Thing

PHRASING_NAMES = ("terse", "plain")
COUNT_WORDS = ("zero", "one", "two", "three", "four")


def plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"


class Terse:
    """Lower-case words, one per colour-shape pair, a spaced ``?`` and ``.``."""

    name = "terse"
    suffix = "answer yes or no ."

    def thing(self, t: "Thing") -> str:
        return f"{t.colour}{t.shape}"

    def caption(self, s: "Scene") -> str:
        """The layout, the objects left to right each with its third, the count of each shape present."""

        things = " ".join(f"{self.thing(t)} {s.third(t)}" for t in s.objects)
        counts = " ".join(f"{COUNT_WORDS[s.count(shape)]} {plural(s.count(shape), shape)}" for shape in SHAPES
                          if s.count(shape))
        return f"{s.layout} scene {things} {counts}"

    def ask(self, text: str) -> str:
        return f"{text} ? {self.suffix}"

    def exists(self, colour: str, shape: str) -> str:
        return self.ask(f"is there a {colour}{shape}")

    def count(self, n: int, shape: str) -> str:
        return self.ask(f"are there {COUNT_WORDS[n]} {plural(n, shape)}")

    def relation(self, a: "Thing", relation: str, b: "Thing") -> str:
        return self.ask(f"is the {self.thing(a)} {relation} of the {self.thing(b)}")

    def end_colour(self, end: str, colour: str) -> str:
        return self.ask(f"is the {end} object {colour}")

    def layout(self, layout: str) -> str:
        return self.ask(f"is this a {layout} scene")

    def open_questions(self, s: "Scene", end: str, named: "Thing") -> list[tuple[str, str]]:
        thing = s.objects[0] if end == "leftmost" else s.objects[-1]
        k = s.count(s.focus)
        return [("what scene is this ?", f"a {s.layout} scene ."),
                (f"how many {s.focus}s are there ?", f"{COUNT_WORDS[k]} ."),
                (f"what colour is the {end} object ?", f"{thing.colour} ."),
                (f"where is the {self.thing(named)} ?", f"at {s.third(named)} ."),
                (f"what is the {end} object ?", f"a {self.thing(thing)} .")]

    def user_turn(self, caption: str, question: str) -> str:
        """The caption in place of the image, then the question."""
        return f"{caption} . {question}"

    def words(self) -> list[str]:
        """Every word the captions, questions and answers use (the word tokenizer's vocabulary)."""

        words = ["a", "scene", "at", "and", "the", "is", "there", "are", "this", "what", "where",
                 "how", "many", "colour", "object", "of", "answer", "yes", "or", "no", "user", "assistant", "system"]
        words += [*COLOURS, *SHAPES, *(s + "s" for s in SHAPES), *LAYOUTS, *THIRDS, *ENDS, *COUNT_WORDS,
                  *(colour + shape for colour in COLOURS for shape in SHAPES)]
        return list(dict.fromkeys(words))


# Where an object's third is said in a plain caption and answer.
PLAIN_THIRDS = {"left": "on the left", "middle": "in the middle", "right": "on the right"}
# What each layout means, after its name in a plain caption (a pretrained LLM does not know the names).
PLAIN_LAYOUTS = {"row": "the objects stand level in a row", "rising": "each object is higher than the one to its left",
                 "falling": "each object is lower than the one to its left",
                 "arch": "the objects in the middle are higher than the two at the ends"}


def article(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


class Plain:
    """English sentences in the words the questions use: a colour and a shape ("red circle"), "to the left of",
    "the leftmost object", "two circles", "a rising scene"; the caption states the order, each object's third,
    the colour at each end, the count of each shape and the layout."""

    name = "plain"
    suffix = "Answer yes or no."

    def thing(self, t: "Thing") -> str:
        return f"{t.colour} {t.shape}"

    def caption(self, s: "Scene") -> str:

        things = [f"a {self.thing(t)} {PLAIN_THIRDS[s.third(t)]}" for t in s.objects]
        order = ", ".join(things[:-1]) + f" and {things[-1]}"
        counts = [f"{COUNT_WORDS[s.count(shape)]} {plural(s.count(shape), shape)}" for shape in SHAPES
                  if s.count(shape)]
        verb = "is" if s.count(next(shape for shape in SHAPES if s.count(shape))) == 1 else "are"
        return (f"This is {article(s.layout)} scene: {PLAIN_LAYOUTS[s.layout]}. From left to right: {order}. "
                f"The leftmost object is {s.objects[0].colour} and the rightmost object is {s.objects[-1].colour}. "
                f"There {verb} "
                f"{', '.join(counts[:-1])}{' and ' if len(counts) > 1 else ''}{counts[-1]}.")

    def ask(self, text: str) -> str:
        return f"{text}? {self.suffix}"

    def exists(self, colour: str, shape: str) -> str:
        return self.ask(f"Is there a {colour} {shape}")

    def count(self, n: int, shape: str) -> str:
        return self.ask(f"{'Is' if n == 1 else 'Are'} there {COUNT_WORDS[n]} {plural(n, shape)}")

    def relation(self, a: "Thing", relation: str, b: "Thing") -> str:
        return self.ask(f"Is the {self.thing(a)} to the {relation} of the {self.thing(b)}")

    def end_colour(self, end: str, colour: str) -> str:
        return self.ask(f"Is the {end} object {colour}")

    def layout(self, layout: str) -> str:
        return self.ask(f"Is this {article(layout)} scene")

    def open_questions(self, s: "Scene", end: str, named: "Thing") -> list[tuple[str, str]]:
        thing = s.objects[0] if end == "leftmost" else s.objects[-1]
        k = s.count(s.focus)
        return [("What scene is this?", f"{article(s.layout).capitalize()} scene."),
                (f"How many {s.focus}s are there?", f"{COUNT_WORDS[k].capitalize()}."),
                (f"What colour is the {end} object?", f"{thing.colour.capitalize()}."),
                (f"Where is the {self.thing(named)}?", f"{PLAIN_THIRDS[s.third(named)].capitalize()}."),
                (f"What is the {end} object?", f"A {self.thing(thing)}.")]

    def user_turn(self, caption: str, question: str) -> str:
        """The caption, named as the image's description, then the question (one line: the word tokenizer of the tiny
        chat LLM has no newline)."""
        return f"The image: {caption} {question}"

    def words(self) -> list[str]:

        words = ["This", "this", "is", "Is", "a", "A", "an", "An", "scene", "From", "to", "the", "The", "and",
                 "object", "There", "there", "are", "Are", "Answer", "yes", "or", "no", "of", "What", "How", "many",
                 "colour", "Where", "image", "user", "assistant", "system"]
        words += " ".join([*PLAIN_LAYOUTS.values(), *PLAIN_THIRDS.values()]).split()
        words += [third.split()[0].capitalize() for third in PLAIN_THIRDS.values()]
        words += [*COLOURS, *(c.capitalize() for c in COLOURS), *SHAPES, *(s + "s" for s in SHAPES), *LAYOUTS,
                  *THIRDS, *ENDS, *COUNT_WORDS, *(w.capitalize() for w in COUNT_WORDS)]
        return list(dict.fromkeys(words))


PHRASINGS = {"terse": Terse(), "plain": Plain()}


def get_phrasing(name: str) -> Terse | Plain:
    """The phrasing called ``name`` (one of :data:`PHRASING_NAMES`)."""
    try:
        return PHRASINGS[name]
    except KeyError:
        raise ValueError(f"phrasing: expected one of {', '.join(PHRASING_NAMES)}, got {name!r}") from None
