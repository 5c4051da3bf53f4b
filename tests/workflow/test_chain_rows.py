"""A model added to a paper's table is one row: the DAG builds, evaluates and reports it with no other edit."""
from __future__ import annotations

import json
import sys

import pytest

from .conftest import copy_repository, run, snakemake

# A row per paper, written into the copy's config/<paper>.py just below its table (a named config: the same rule,
# another value of a section the rule already reads).
ROWS = {
    "opal": ('"offpolicy_long_lr"', 'Step("opal_offpolicy", "stage 2B at another learning rate", '
             'start="offpolicy_short", sections=("opal.offpolicy_long", "opal.niah_protocol"), '
             'variant={"opal.offpolicy_long.train.lr": 0.001}, options={"phase": "long"})'),
    "hedgemamba": ('"finetune_from_mse"', 'Step("hedgemamba_finetune", "HedgeMamba (stage 2) from the MSE-matched '
                   'Hedgehog, no conversion", start="hedgehog_output_mse", sections=("hedgemamba.finetune",), '
                   'options={"variant": "hedgehog"})'),
}


def add_row(repo, paper: str) -> str:
    name, step = ROWS[paper]
    path = repo / "src" / "relin" / "config" / f"{paper}.py"
    text = path.read_text()
    anchor = f'check_chain("{paper}", CHAIN)'
    assert anchor in text, f"config/{paper}.py: no {anchor}"
    path.write_text(text.replace(anchor, f"CHAIN[{name}] = {step}\n{anchor}"))
    return name.strip('"')


def manifest_of(repo, paper: str) -> dict:
    """The copy's report manifest of ``paper`` (its files, without digests) from its params."""
    code = ("import json; from relin.config.loader import as_dict; "
            "from relin.config.params import load_params, lookup; from relin.manifest import paper_files; "
            "p = as_dict(load_params('params.yaml')); "
            f"print(json.dumps(paper_files({paper!r}, lambda k: lookup(p, k))))")
    return json.loads(run([sys.executable, "-c", code], repo, PYTHONPATH=str(repo / "src")).stdout)


@pytest.mark.parametrize("paper", sorted(ROWS))
def test_a_row_adds_its_jobs_and_report_entries(tmp_path, paper):
    """In a config that runs every row of the table (``<paper>.rows: []``)."""
    import yaml

    repo = copy_repository(tmp_path)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params[paper]["rows"] = []
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    before = manifest_of(repo, paper)
    row = add_row(repo, paper)
    dry = snakemake(repo, "-n", "--forceall", "-p", PYTHONPATH=str(repo / "src")).stdout
    model = f"results/{paper}/{row}/model"
    assert f"--out {model}" in dry, f"no job builds {model}"
    assert f"--model {model} --data" in dry and f"--name {paper}-{row} " in dry, "the new model is not evaluated"
    after = manifest_of(repo, paper)
    added = {kind: [e for e in entries if e not in before.get(kind, [])]
             for kind, entries in after.items() if isinstance(entries, list)}
    name = f"{paper}-{row}"
    assert added["eval"] == [{"name": name, "path": f"results/eval/{name}/metrics.json"}]
    assert added["items"] == [{"name": name, "path": f"results/eval/{name}/items.csv"}]
    assert added["history"] == [{"name": name, "path": f"results/{paper}/{row}/history.csv"}]
    assert f"--paper {paper} --out results/report-inputs/{paper}.json" in dry, "no manifest job lists it"
    command = next(line for line in dry.splitlines() if f"--out {model}" in line)
    rendered = json.loads(command.split("--config '", 1)[1].split("'", 1)[0])
    if paper == "opal":  # the row's variant reaches its command's config, and only its own
        assert rendered["opal.offpolicy_long"]["train"]["lr"] == 0.001
        assert '"lr": 0.001' not in next(line for line in dry.splitlines()
                                         if "--out results/opal/offpolicy_long/model" in line)
    labels = run([sys.executable, "-c", f"from relin.config.{paper} import MODELS; print(MODELS[{row!r}])"], repo,
                 PYTHONPATH=str(repo / "src")).stdout.strip()
    assert labels == ROWS[paper][1].split('"')[3], "the report's tables label the row from the table"
