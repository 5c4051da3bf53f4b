"""``relin report`` end to end on fixture stage outputs listed by report manifests, and its one-line input errors."""
import json
from pathlib import Path

from relin.cli import main

SECTIONS = {"report": {"title": "Fixture report"}, "opal.teacher": "qwen3", "opal.swa": {"window": 32, "sinks": 4},
            "opal.niah_protocol": "zero_shot", "opal.onpolicy": {}, "hedgemamba.teacher": "gpt_neox",
            "teacher.train": {}, "data.niah": {}}
CONFIG = json.dumps(SECTIONS)


def _named(paths):
    """``{"name", "path"}`` entries, each named as eval-lm and teacher-lm name their outputs (or ``NAME=PATH``)."""
    def entry(path):
        name, sep, rest = str(path).partition("=")
        if sep:
            return {"name": name, "path": rest}
        parts = Path(path).parts
        return {"name": parts[-2] if parts[-3] == "eval" else f"{parts[-3]}-{parts[-2]}", "path": str(path)}

    return [entry(p) for p in paths]


def manifest(tmp_path, lm_eval=(), **kinds):
    """A report manifest listing ``kinds`` (eval, history, by_length: lists of paths) as relin report-manifest
    writes one."""
    path = tmp_path / f"manifest-{len(list(tmp_path.glob('manifest-*')))}.json"
    files = {kind: _named(paths) for kind, paths in kinds.items()}
    files["lm_eval"] = [{"name": Path(p).stem, "path": str(p)} for p in lm_eval]
    path.write_text(json.dumps({"paper": "opal", "files": files}))
    return str(path)


def _report(paths, out, extra=(), lm_eval=()):
    listed = manifest(Path(out).parent, lm_eval=lm_eval, eval=paths["eval"], history=paths["history"],
                      by_length=paths["by_length"])
    return ["report", "--config", CONFIG, "--manifest", listed, "--out", str(out), *extra]


def test_report_builds_pages_with_figures_and_numbers(tmp_path, results):
    out = tmp_path / "report"
    assert main(_report(results["paths"], out)) == 0
    page, summary = (out / "index.html").read_text(), (out / "summary.md").read_text()
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert figures == ["training_teacher.png"], "without item scores no paper section (and none of its figures)"
    assert all((out / "figures" / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in figures)
    assert all(f'src="figures/{f}"' in page and f"(figures/{f})" in summary for f in figures)
    assert "<title>Fixture report</title>" in page and summary.startswith("# Fixture report")
    assert "Produced by relin at commit" in summary and "from params.yaml." in summary
    assert "Not evidence" not in summary, "the fixture histories reach step 50 = report.min_steps"
    for name, metrics in results["metrics"].items():
        for text in (page, summary):
            assert name in text
            assert f"{metrics['perplexity']:.3f}" in text
            assert all(f"{acc:.3f}" in text for acc in metrics["accuracy"].values())
            assert f"{results['histories'][name][-1]['loss']:.4f}" in text
    assert all(f"{r['accuracy']:.3f}" in summary for r in results["by_length"] if r["task"].startswith("niah"))


def test_histories_take_explicit_names(tmp_path, results):
    out = tmp_path / "report"
    qwen3 = results["paths"]["history"][0]
    assert main(["report", "--config", CONFIG, "--manifest", manifest(tmp_path, history=[f"my-run={qwen3}"]),
                 "--out", str(out)]) == 0
    summary = (out / "summary.md").read_text()
    assert "| my-run | 50 |" in summary and "by_length" not in summary


def test_a_few_step_run_says_at_its_head_that_its_verdicts_are_not_evidence(tmp_path, results):
    out = tmp_path / "report"
    config = json.dumps({**SECTIONS, "report": {"title": "Smoke", "min_steps": 100}})
    assert main(["report", "--config", config, *_report(results["paths"], out)[3:],
                 "--configs", "params.yaml", "workflow/configs/smoke.yaml"]) == 0
    summary = (out / "summary.md").read_text()
    head = summary.split("Built from")[0]
    assert "from params.yaml + workflow/configs/smoke.yaml." in head
    assert "**Not evidence: 2 training stage(s) took fewer than 100 optimizer steps" in head


def test_missing_input_file_is_one_line_naming_it(tmp_path, results, capsys):
    missing = tmp_path / "results" / "eval" / "nobody" / "metrics.json"
    out = tmp_path / "report"
    paths = {**results["paths"], "eval": [*results["paths"]["eval"], str(missing)]}
    assert main(_report(paths, out)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(missing) in err and err.startswith("relin report: error:")
    assert not out.exists()


def test_two_evaluations_under_one_name_are_an_error(tmp_path, results, capsys):
    first = results["paths"]["eval"][0]
    listed = manifest(tmp_path, eval=[first, f"teacher-qwen3={results['paths']['eval'][1]}"])
    assert main(["report", "--config", CONFIG, "--manifest", listed, "--out", str(tmp_path / "report")]) == 2
    assert "teacher-qwen3" in capsys.readouterr().err


def test_metrics_file_without_required_keys_is_rejected(tmp_path, capsys):
    bad = tmp_path / "metrics.json"
    bad.write_text(json.dumps({"name": "x"}))
    listed = manifest(tmp_path, eval=[f"x={bad}"])
    assert main(["report", "--config", CONFIG, "--manifest", listed, "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "perplexity" in err


def test_history_without_steps_shows_dashes(tmp_path, results):
    """A pretrained teacher is not trained: its history.csv is a header only."""
    empty = tmp_path / "results" / "teacher" / "loaded" / "history.csv"
    empty.parent.mkdir(parents=True)
    empty.write_text("step,loss,lr,grad_norm,tokens_per_s\n")
    out = tmp_path / "report"
    listed = manifest(tmp_path, history=[str(empty), *results["paths"]["history"]])
    assert main(["report", "--config", CONFIG, "--manifest", listed, "--out", str(out)]) == 0
    assert "| teacher-loaded | – | – |" in (out / "summary.md").read_text()
    assert (out / "figures" / "training_teacher.png").is_file()


def test_report_is_a_function_of_its_inputs(tmp_path, results):
    first, second = tmp_path / "first", tmp_path / "second"
    assert main(_report(results["paths"], first)) == 0
    assert main(_report(results["paths"], second)) == 0
    for name in ("index.html", "summary.md", "figures/training_teacher.png"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_lm_eval_results_become_a_table_with_recovery(tmp_path, results):
    scores = {"teacher": {"gsm8k": {"exact_match": 0.5}, "piqa": {"acc": 0.8, "acc_stderr": 0.01}},
              "onpolicy": {"gsm8k": {"exact_match": 0.25}, "piqa": {"acc": 0.6}}}
    files = []
    for name, table in scores.items():
        files.append(tmp_path / f"{name}.json")
        files[-1].write_text(json.dumps({"name": name, "results": table, "n_samples": {}, "num_fewshot": {}}))
    out = tmp_path / "report"
    assert main(_report(results["paths"], out, lm_eval=files)) == 0
    summary = (out / "summary.md").read_text()
    assert "| gsm8k | exact_match | 0.500 | 0.250 | 50% |" in summary
    assert "| piqa | acc | 0.800 | 0.600 | 75% |" in summary and "acc_stderr" not in summary


def test_a_file_that_is_not_a_manifest_is_one_line(tmp_path, capsys):
    bad = tmp_path / "manifest.json"
    bad.write_text(json.dumps({"eval": []}))
    assert main(["report", "--config", CONFIG, "--manifest", str(bad), "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(bad) in err and "not a report manifest" in err


def test_the_report_names_the_commit_of_its_rules_and_warns_when_they_came_after_the_run():
    """Issue 62: a rule that decides verdicts is committed before the run whose report uses it. The head names the
    last commit of the rules; rules that differ from it, or were committed after the first output was written, are a
    warning at the head."""
    from datetime import datetime, timezone

    from relin.report.build import Provenance, rules_notices

    committed = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
    before, after = committed.timestamp() + 3600, committed.timestamp() - 3600
    clean = Provenance(("params.yaml",), "abc1234", "2026-12-01", "9f8e7d6", committed.isoformat())
    notices = rules_notices(clean, before)
    assert [n.warning for n in notices] == [False] and "as of commit 9f8e7d6 (2026-12-01T12:00:00+00:00)" in \
        notices[0].text
    late = rules_notices(clean, after)
    assert late[-1].warning and "committed after this run's stages wrote their outputs" in late[-1].text
    dirty = rules_notices(Provenance(("params.yaml",), "abc1234+", "2026-12-01", "9f8e7d6+", committed.isoformat()),
                          before)
    assert dirty[-1].warning and "differ from their last commit" in dirty[-1].text


def test_the_rules_commit_is_the_last_that_changed_a_rule_file(tmp_path, monkeypatch):
    import subprocess

    from relin.stages.report import RULES, rules_commit

    def git(*argv):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *argv], cwd=tmp_path, check=True,
                              capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "params.yaml").write_text("report: {}\n")
    git("add", "."), git("commit", "-qm", "rules")
    ruled = git("rev-parse", "--short", "HEAD")
    (tmp_path / "README.md").write_text("x\n")
    git("add", "."), git("commit", "-qm", "not a rule")
    monkeypatch.chdir(tmp_path)
    assert "params.yaml" in RULES and rules_commit()[0] == ruled
    (tmp_path / "params.yaml").write_text("report: {mastery: 0.9}\n")
    assert rules_commit()[0] == ruled + "+"


def test_every_module_that_declares_claim_rows_is_a_rule_file():
    """A claim row's threshold or precondition decides verdicts: each config module that declares ``CLAIMS`` is among
    the files whose last commit the report names."""
    import importlib
    from pathlib import Path

    import relin.config
    from relin.stages.report import RULES

    root = Path(relin.config.__file__).parent
    declaring = [f"src/relin/config/{path.name}" for path in sorted(root.glob("*.py"))
                 if hasattr(importlib.import_module(f"relin.config.{path.stem}"), "CLAIMS")]
    assert declaring and all(any(path.startswith(rule) for rule in RULES) for path in declaring), declaring
    assert "src/relin/config/claims.py" in RULES
