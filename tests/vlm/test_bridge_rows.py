"""A bridge added to LIA-MTR's table (relin.config.lia_mtr.BRIDGES) is one row: the config may name it, the factory
builds it, the DAG trains and tests it in the bridge NIAH, and the report lists it, with no other hand edit."""
from __future__ import annotations

import json
import sys

import yaml

from ..workflow.conftest import SMOKE, copy_repository, run, snakemake

NAME = "lia_mtr_slow"
TESTS = "λ_max = 0.999: does a slower scale carry the needle further?"
# An ablation as a variant of lia_mtr: the slowest decay changed, written into the copy just above the table's check.
ROW = f'BRIDGES["{NAME}"] = BridgeRow("mtr", "ablation: slowest decay 0.999", "{TESTS}", {{"decay_max": 0.999}})'

CHECK = f"""
import json, math
from relin.config.lia_mtr import BRIDGE_NAMES
from relin.config.loader import as_dict
from relin.config.params import load_params, lookup
from relin.layers.bridges import Bridge
from relin.manifest import paper_files
import yaml
params = as_dict(load_params("params.yaml"))
schema = yaml.safe_load(open("workflow/schemas/params.schema.yaml"))["properties"]["lia_mtr"]["properties"]
decays = Bridge({NAME!r}, 8, 8).mixer.log_decays.exp()
print(json.dumps({{"names": BRIDGE_NAMES, "niah": lookup(params, "lia_mtr.niah.bridges"),
                  "enum": schema["niah"]["properties"]["bridges"]["items"]["enum"],
                  "slowest": float(decays.max()),
                  "manifest": paper_files("lia_mtr", lambda k: lookup(params, k))["lia_mtr"]["niah"]}}))
"""

SECTION = f"""
import json, sys
from pathlib import Path
from relin.report.lia_mtr import LiaSettings, lia_mtr_section
from relin.report.page import render_markdown
entries = [e for e in json.loads(sys.argv[1]) if e["name"] == {NAME!r}]
Path("figures").mkdir()
section, claims = lia_mtr_section({{"niah": entries}}, LiaSettings(0.8, 200), Path("figures"), "figures")
print(render_markdown("report", [section], []))
"""


def test_a_bridge_row_is_named_built_run_and_reported(tmp_path):
    repo = copy_repository(tmp_path)
    path = repo / "src" / "relin" / "config" / "lia_mtr.py"
    text = path.read_text()
    anchor = "check_bridges(BRIDGES)"
    assert anchor in text, "config/lia_mtr.py: no check_bridges(BRIDGES)"
    path.write_text(text.replace(anchor, f"{ROW}\n{anchor}"))
    for config in ("params.yaml", SMOKE):  # listed in the NIAH of the copy's params and of the smoke overlay on them
        params = yaml.safe_load((repo / config).read_text())
        params["lia_mtr"]["niah"]["bridges"].append(NAME)
        (repo / config).write_text(yaml.safe_dump(params, sort_keys=False))
    env = {"PYTHONPATH": str(repo / "src"), "OMP_NUM_THREADS": "1"}
    run(["relin", "schema"], repo, **env)  # the generated schema, regenerated (its enums derive from the table)

    found = json.loads(run([sys.executable, "-c", CHECK], repo, **env).stdout)
    assert found["names"][-1] == NAME and NAME in found["niah"] and NAME in found["enum"], "the config refuses it"
    assert abs(found["slowest"] - 0.999) < 1e-6, "the factory did not build the row's variant"
    assert [e["name"] for e in found["manifest"]].count(NAME) == 1, "the report manifest does not list it"

    dry = snakemake(repo, "-n", "--forceall", "-p", **env).stdout
    commands = [line.split("relin ", 1)[1] for line in dry.splitlines()
                if "relin lia-mtr-bridge-niah " in line and f"--bridge {NAME} " in line]
    assert len(commands) == 1, f"expected one bridge_niah job of {NAME}, found {len(commands)}"
    command = "relin " + commands[0]
    assert f"--out results/lia_mtr/niah/{NAME}/model" in command
    log = command.rsplit(" > ", 1)[1].split()[0]
    (repo / log).parent.mkdir(parents=True, exist_ok=True)
    job = run(["bash", "-c", command], repo, check=False, **env)  # the job the dry run prints, as Snakemake runs it
    assert job.returncode == 0, f"{command}\n{(repo / log).read_text()}"

    entries = json.dumps(found["manifest"])
    page = run([sys.executable, "-c", SECTION, entries], repo, **env).stdout
    niah = next(line for line in page.splitlines() if line.startswith(f"| {NAME} |") and TESTS in line)
    assert "did not learn" in niah or "carries" in niah or "learned" in niah, f"no reading in {niah!r}"
    assert f"Theorem 2: the state stays bounded as N grows ({NAME})" in page, "its state claim is missing"
    assert (repo / "figures" / "lia_mtr_niah.png").is_file(), "no NIAH figure"
