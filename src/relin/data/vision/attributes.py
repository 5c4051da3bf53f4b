"""The synthetic scenes' attribute values: what a scene is drawn from (:mod:`.synth`) and what its captions and
questions name (:mod:`.phrasing`), kept apart so that the two read one list without importing each other."""
from __future__ import annotations

COLOURS = {"red": (220, 30, 30), "blue": (30, 60, 230), "yellow": (240, 220, 20), "purple": (150, 40, 180)}
SHAPES = ("square", "circle", "triangle")
LAYOUTS = ("row", "rising", "falling", "arch")
THIRDS = ("left", "middle", "right")
ENDS = ("leftmost", "rightmost")
