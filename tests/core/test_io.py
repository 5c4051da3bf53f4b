"""Outputs written atomically: one rename, and the modes any new file of the process would have."""
import os
import stat

import pytest

from relin.io import atomic_dir


def test_an_atomic_directory_gets_the_umask_modes_whatever_its_writer_chose(tmp_path):
    """safetensors writes its file 0600; the saved model must read like every other output (0644 under umask 022)."""
    old = os.umask(0o022)
    try:
        with atomic_dir(tmp_path / "model") as tmp:
            (tmp / "model.safetensors").write_bytes(b"weights")
            os.chmod(tmp / "model.safetensors", 0o600)
            (tmp / "sub").mkdir(mode=0o700)
            (tmp / "sub" / "config.json").write_text("{}")
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "model").rglob("*")}
    assert modes == {"model.safetensors": 0o644, "sub": 0o755, "config.json": 0o644}


def test_a_failed_atomic_directory_leaves_the_previous_output(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "kept.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_dir(tmp_path / "out") as tmp:
            (tmp / "new.txt").write_text("new")
            raise RuntimeError("the stage failed")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["kept.txt"]


def test_a_path_inside_a_stage_output_is_attributed_to_that_output(tmp_path):
    from relin.io import atomic_write_json, manifest_path, producing_output

    out = tmp_path / "results" / "bpe"
    (out / "tokenizer").mkdir(parents=True)
    assert producing_output(out / "tokenizer") == out / "tokenizer", "no stage wrote it: the path itself"
    atomic_write_json(manifest_path(out), {"stage": "bpe-tokenizer", "run_id": "r"})
    assert producing_output(out / "tokenizer") == out
    assert producing_output(out) == out
    atomic_write_json(manifest_path(out / "tokenizer"), {"stage": "other", "run_id": "s"})
    assert producing_output(out / "tokenizer") == out / "tokenizer", "its own manifest first"
