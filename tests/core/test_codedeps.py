"""The code a stage runs: what DVC lists as its dependencies and what its checkpoints are keyed on."""
import shutil

from relin.pipeline.codedeps import SourceTree, code_digest, code_files

from ..workflow.conftest import ROOT


def _copy_tree(tmp_path):
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return SourceTree.checkout(tmp_path)


def test_files_follow_imports_transitively_with_their_packages():
    tree = SourceTree.checkout(ROOT)
    names = {tree.module_name(p) for p in code_files("relin.stages.teacher_lm", tree)}
    assert {"relin", "relin.stages", "relin.stages.teacher_lm", "relin.train", "relin.train.loop",
            "relin.train.checkpoint", "relin.pipeline.codedeps", "relin.models.teachers"} <= names
    assert not any(n.startswith(("relin.eval", "relin.report")) for n in names), names
    assert "relin.stages.eval_lm" not in names, "other stage modules are not followed"


def test_digest_changes_with_the_code_a_stage_runs_and_only_with_it(tmp_path):
    tree = _copy_tree(tmp_path)
    before = code_digest("relin.stages.teacher_lm", tree)
    report = tree.package / "report" / "tables.py"
    report.write_text(report.read_text() + "\n# a comment in code the teacher stage does not run\n")
    assert code_digest("relin.stages.teacher_lm", tree) == before
    objectives = tree.package / "train" / "objectives" / "ce.py"
    objectives.write_text(objectives.read_text() + "\nUNUSED = 1\n")
    assert code_digest("relin.stages.teacher_lm", tree) != before


def test_installed_tree_is_this_checkout():
    tree = SourceTree.installed()
    assert tree.package == (ROOT / "src" / "relin").resolve()
