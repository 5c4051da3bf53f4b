"""Real photographs shipped inside installed packages, for a qualitative look at a VLM (not a benchmark): each a
file found through its distribution's ``RECORD`` (never imported) with a one-line description of what it shows.

scikit-image's wheel holds 19 of them (its ``skimage.data`` docstrings give each one's source and licence, mostly
public domain or CC0); scikit-learn ships two Flickr photos (CC-BY-2.0, its ``datasets/images/README.txt``) and
matplotlib a portrait (its ``sample_data``). scikit-image is read only: ``tools/install_pretrained.sh photos``
installs its pinned wheel ``--no-deps``; a package not installed leaves its photos out, and says so.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Photo:
    package: str
    path: str  # relative to site-packages, as the package's RECORD lists it
    description: str

    @property
    def name(self) -> str:
        return Path(self.path).stem


PHOTOS = (
    *(Photo("scikit-image", f"skimage/data/{name}", text) for name, text in (
        ("astronaut.png", "astronaut Eileen Collins in her flight suit, a flag behind her"),
        ("camera.png", "a man with a camera on a tripod (greyscale)"),
        ("chelsea.png", "Chelsea, a tabby cat"),
        ("coffee.png", "a cup of coffee on a saucer"),
        ("coins.png", "Greek coins on a dark background (greyscale)"),
        ("rocket.jpg", "a rocket on its launch pad"),
        ("motorcycle_left.png", "a motorcycle in a workshop"),
        ("hubble_deep_field.jpg", "galaxies in the Hubble deep field"),
        ("retina.jpg", "a human retina, its blood vessels"),
        ("moon.png", "the surface of the moon (greyscale)"),
        ("page.png", "a scanned page of printed text (greyscale)"),
        ("text.png", "hand-written text on a board (greyscale)"),
        ("brick.png", "a brick wall (greyscale)"),
        ("grass.png", "grass (greyscale)"),
        ("gravel.png", "gravel (greyscale)"),
        ("cell.png", "a cell under a microscope (greyscale)"),
        ("ihc.png", "a stained tissue slide (immunohistochemistry)"),
        ("clock_motion.png", "a clock, blurred by motion (greyscale)"),
        ("color.png", "a chart of colours"))),
    Photo("scikit-learn", "sklearn/datasets/images/china.jpg", "a Chinese temple among trees"),
    Photo("scikit-learn", "sklearn/datasets/images/flower.jpg", "a flower, close up"),
    Photo("matplotlib", "matplotlib/mpl-data/sample_data/grace_hopper.jpg", "a portrait of Grace Hopper in uniform"),
)


def available_photos() -> tuple[list[tuple[Photo, "object"]], list[str]]:
    """``([(photo, RGB uint8 array [H, W, 3]), ...], [a note per package not installed])``."""
    from importlib import metadata

    import numpy as np
    from PIL import Image

    found, missing = [], {}
    for photo in PHOTOS:
        try:
            dist = metadata.distribution(photo.package)
        except metadata.PackageNotFoundError:
            missing[photo.package] = f"{photo.package} not installed: its photos left out"
            continue
        listed = {f.as_posix(): f for f in dist.files or ()}
        if photo.path not in listed or not Path(listed[photo.path].locate()).is_file():
            missing[photo.path] = f"{photo.path} not in {photo.package} {dist.version}: left out"
            continue
        with Image.open(listed[photo.path].locate()) as image:
            found.append((photo, np.asarray(image.convert("RGB"))))
    return found, list(missing.values())
