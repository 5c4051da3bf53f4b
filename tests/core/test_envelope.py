"""Benchmark JSONs: one envelope (commit, dirty flag, GPU, versions, date), refused on a tree that is not its commit."""
import ast
import json
import os
import subprocess
import sys
from datetime import datetime

import pytest

from relin.envelope import COMMIT_ENV, DIRTY_ENV, Envelope

from ..workflow.conftest import ROOT

FIELDS = {"benchmark", "commit", "dirty", "gpu", "gpu_count", "host", "versions", "date_utc", "argv"}


def git(root, *args):
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A one-commit repository; the variables of a tree without ``.git`` unset."""
    monkeypatch.delenv(COMMIT_ENV, raising=False)
    monkeypatch.delenv(DIRTY_ENV, raising=False)
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "bench.py").write_text("print(1)\n")
    (repo / ".gitignore").write_text("out/\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "one")
    return repo


@pytest.fixture
def no_checkout(tmp_path, monkeypatch):
    """A folder outside any git checkout, as a lent GPU machine gets the tree."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.delenv(COMMIT_ENV, raising=False)
    monkeypatch.delenv(DIRTY_ENV, raising=False)
    folder = tmp_path / "tree"
    folder.mkdir()
    return folder


def test_a_clean_tree_writes_the_envelope_before_the_payload(checkout):
    envelope = Envelope.start("demo", root=checkout, packages=("pytest",))
    path = envelope.write(checkout / "out" / "demo.json", {"rows": [{"ms": 1.5}]})
    record = json.loads(path.read_text())
    assert list(record) == ["envelope", "rows"] and record["rows"] == [{"ms": 1.5}]
    head = record["envelope"]
    assert set(head) == FIELDS
    assert head["benchmark"] == "demo"
    assert head["commit"] == git(checkout, "rev-parse", "HEAD") and head["dirty"] is False
    assert {"python", "torch", "triton", "transformers", "pytest"} <= set(head["versions"])
    assert head["versions"]["torch"] and head["versions"]["pytest"]
    assert (head["gpu"] is None) == (head["gpu_count"] == 0)
    assert datetime.fromisoformat(head["date_utc"]).tzinfo is not None
    assert head["argv"] == sys.argv
    assert not list(path.parent.glob("*.tmp*")), "written whole, no temporary left"


@pytest.mark.parametrize("change", ["edit", "untracked"])
def test_a_dirty_tree_refuses_in_one_line(checkout, change):
    if change == "edit":
        (checkout / "bench.py").write_text("print(2)\n")
    else:  # a new script is no part of the commit either
        (checkout / "new_bench.py").write_text("print(3)\n")
    with pytest.raises(SystemExit) as refused:
        Envelope.start("demo", root=checkout)
    message = str(refused.value.code)
    assert "\n" not in message and "demo" in message and "--allow-dirty" in message


def test_ignored_files_leave_the_tree_clean(checkout):
    (checkout / "out").mkdir()
    (checkout / "out" / "earlier.json").write_text("{}")
    assert Envelope.start("demo", root=checkout).dirty is False


def test_allow_dirty_writes_and_marks_the_json_dirty(checkout):
    (checkout / "bench.py").write_text("print(2)\n")
    envelope = Envelope.start("demo", root=checkout, allow_dirty=True)
    record = json.loads(envelope.write(checkout / "out" / "demo.json", {}).read_text())
    assert record["envelope"]["dirty"] is True and record["envelope"]["commit"] == git(checkout, "rev-parse", "HEAD")


def test_without_git_the_environment_names_the_tree(no_checkout, monkeypatch):
    with pytest.raises(SystemExit, match=COMMIT_ENV):
        Envelope.start("demo", root=no_checkout)
    monkeypatch.setenv(COMMIT_ENV, "abc1234")
    with pytest.raises(SystemExit):  # a commit without a word on the tree's state is not a clean tree
        Envelope.start("demo", root=no_checkout)
    monkeypatch.setenv(DIRTY_ENV, "1")
    with pytest.raises(SystemExit, match="differs"):
        Envelope.start("demo", root=no_checkout)
    monkeypatch.setenv(DIRTY_ENV, "0")
    envelope = Envelope.start("demo", root=no_checkout)
    assert (envelope.commit, envelope.dirty) == ("abc1234", False)


def test_a_commit_named_in_the_environment_wins_over_a_stale_checkout(checkout, monkeypatch):
    """The lent machine copies the working tree over a ``.git`` of an older commit: what the variables name wins."""
    (checkout / "bench.py").write_text("print(2)\n")      # the copied files differ from the stale .git's HEAD
    with pytest.raises(SystemExit, match="differs"):
        Envelope.start("demo", root=checkout)
    monkeypatch.setenv(COMMIT_ENV, "abc1234")
    monkeypatch.setenv(DIRTY_ENV, "0")
    envelope = Envelope.start("demo", root=checkout)
    assert (envelope.commit, envelope.dirty) == ("abc1234", False)


def test_the_variables_printed_here_name_this_checkout(checkout):
    line = subprocess.run([sys.executable, "-m", "relin.envelope"], cwd=checkout, capture_output=True, text=True,
                          check=True).stdout.strip()
    assert line == f"{COMMIT_ENV}={git(checkout, 'rev-parse', 'HEAD')} {DIRTY_ENV}=0"


def test_a_benchmark_script_refuses_before_measuring(no_checkout):
    env = {k: v for k, v in os.environ.items() if k not in (COMMIT_ENV, DIRTY_ENV)}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu" / "hybrid_decode.py"), "--size", "tiny",
                           "--out", str(no_checkout)], cwd=no_checkout, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and "--allow-dirty" in done.stderr
    assert not list(no_checkout.iterdir())


def _names_a_json(path) -> bool:
    return any(isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".json")
               for node in ast.walk(ast.parse(path.read_text())))


def test_every_benchmark_that_writes_json_goes_through_the_envelope():
    scripts = [p for p in sorted((ROOT / "benchmarks").rglob("*.py")) if _names_a_json(p)]
    assert len(scripts) >= 12, scripts
    for script in scripts:
        text = script.read_text()
        assert "Envelope.start(" in text and "Envelope.add_argument(parser)" in text, script.relative_to(ROOT)


def test_every_committed_benchmark_json_opens_with_an_envelope():
    results = sorted((ROOT / "benchmarks" / "results").glob("*.json"))
    assert results
    for path in results:
        record = json.loads(path.read_text())
        assert list(record)[0] == "envelope" and set(record["envelope"]) == FIELDS, path.name
        assert {"torch", "triton", "transformers", "python"} <= set(record["envelope"]["versions"]), path.name
