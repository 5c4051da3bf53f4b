"""A corpus of whole documents from pinned sources, split by document: what ``relin real-text`` and ``relin prose``
both write, so that every stage reading a corpus reads either unchanged.

The corpus is a ``DatasetDict`` of whole documents (columns ``path``, ``text``, ``bytes``; one row per document,
sorted by path) in splits train / validation / test, and ``source.json`` beside it (:func:`source_record`). A
document's split is fixed by a hash of its path; ``max_bytes`` takes documents in another fixed order (a differently
salted hash of the path) until their bytes reach the cap, so the sample spreads over the whole source and a smaller
cap gives a subset of a larger one's documents, in the same splits.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InputError

if TYPE_CHECKING:
    from datasets import DatasetDict

SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class SourceFile:
    """One document of a corpus: its path inside its source (POSIX) and its bytes."""

    path: str
    data: bytes


def _unit(salt: str, path: str) -> float:
    """A number in [0, 1) fixed by ``path`` alone (the same on every machine, unlike ``hash``)."""
    return int.from_bytes(hashlib.sha256(f"{salt}\0{path}".encode()).digest()[:8], "big") / 2.0 ** 64


def split_of(path: str, validation_fraction: float, test_fraction: float) -> str:
    """The split of the document at ``path``: test, validation or train by a hash of the path."""
    u = _unit("split", path)
    return "test" if u < test_fraction else "validation" if u < test_fraction + validation_fraction else "train"


def select(files: list[SourceFile], max_bytes: int) -> list[SourceFile]:
    """The documents taken (in path-hash order) until their bytes reach ``max_bytes`` (0: all), sorted by path."""
    if not max_bytes:
        return files
    chosen, total = [], 0
    for f in sorted(files, key=lambda f: _unit("order", f.path)):
        if total >= max_bytes:
            break
        chosen.append(f)
        total += len(f.data)
    return sorted(chosen, key=lambda f: f.path)


def source_digest(label: str, files: list[SourceFile]) -> str:
    """``sha256:<hex>`` over ``label`` (the source's name and version), then each document's path, size and bytes in
    order: the same documents give the same digest wherever they were read from."""
    digest = hashlib.sha256(f"{label}\n".encode())
    for f in files:
        digest.update(f"{f.path}\0{len(f.data)}\0".encode())
        digest.update(f.data)
    return "sha256:" + digest.hexdigest()


def split_documents(files: list[SourceFile], max_bytes: int, validation_fraction: float, test_fraction: float,
                    who: str, enlarge: str) -> tuple["DatasetDict", dict]:
    """``(DatasetDict, splits)``: the documents ``max_bytes`` selects in splits train / validation / test (columns
    ``path``, ``text``, ``bytes``), and the files and bytes of each split.

    Raises :class:`InputError` (one line, starting with ``who``) on a document that is not UTF-8, or a split left
    without documents (``enlarge`` names the keys that would fill it)."""
    from datasets import Dataset, DatasetDict, Features, Value

    by_split: dict[str, dict[str, list]] = {s: {"path": [], "text": [], "bytes": []} for s in SPLITS}
    for f in select(files, max_bytes):
        try:
            text = f.data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{who}: {f.path} is not UTF-8 (byte {err.start})") from None
        columns = by_split[split_of(f.path, validation_fraction, test_fraction)]
        columns["path"].append(f.path)
        columns["text"].append(text)
        columns["bytes"].append(len(f.data))
    empty = [s for s in SPLITS if not by_split[s]["path"] and (s != "validation" or validation_fraction)]
    if empty:
        raise InputError(f"{who}: no documents in the {', '.join(empty)} split(s) (max_bytes={max_bytes}; expected "
                         f"{enlarge})")
    features = Features({"path": Value("string"), "text": Value("string"), "bytes": Value("int64")})
    data = DatasetDict({s: Dataset.from_dict(by_split[s], features=features) for s in SPLITS})
    return data, {s: {"files": len(by_split[s]["path"]), "bytes": sum(by_split[s]["bytes"])} for s in SPLITS}


def source_record(packages: list[dict], digest: str, files: list[SourceFile], splits: dict) -> dict:
    """What ``source.json`` records: the packages read (each with its version, licence, digest, files and bytes),
    their licences together, the digest of the documents, every document's count and bytes, and files and bytes per
    split."""
    licences = list(dict.fromkeys(p["licence"] for p in packages if p["licence"]))
    return {"packages": packages, "licence": "; ".join(licences), "digest": digest, "source_files": len(files),
            "source_bytes": sum(len(f.data) for f in files), "splits": splits}
