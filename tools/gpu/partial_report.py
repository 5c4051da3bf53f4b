"""The report of whatever part of the DAG finished (``DAG_TARGETS`` or a call's time limit cut it short).

    python3 tools/gpu/partial_report.py --overlay workflow/configs/h200.yaml --out results/report-partial

Reads the stage outputs present under ``results/`` (evaluations, histories, budgets, OPAL's layers, HedgeMamba's
init check and decays, LIA-MTR's results) and runs ``relin report`` on them with the config's report sections.
The report rule of a whole DAG stays the record; this one is for reading a partial run.
"""
from __future__ import annotations

import argparse
import glob
import json
import subprocess
import sys
from pathlib import Path

from relin.config.loader import as_dict
from relin.config.params import load_params, lookup

SECTIONS = ("report", "opal.teacher", "opal.swa", "opal.niah_protocol", "hedgemamba.teacher")


def found(*patterns: str) -> list[str]:
    return sorted(path for pattern in patterns for path in glob.glob(pattern))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--overlay", action="append", default=[], help="config overlays the DAG ran with")
    parser.add_argument("--out", default="results/report-partial", help="report directory to write")
    args = parser.parse_args()
    config = as_dict(load_params("params.yaml", args.overlay))
    evals = [Path(p).parent for p in found("results/eval/*/metrics.json")]
    # LIA-MTR's outputs as the report rule lists them (common.smk's LIA_MTR_REPORT): results, answer folders
    lia_mtr = found("results/lia_mtr/mme/*/metrics.json", "results/lia_mtr/mme/*/answers",
                    *(f"results/lia_mtr/niah/*/{name}" for name in ("items.csv", "history.csv", "metrics.json",
                                                                     "niah.csv")),
                    "results/lia_mtr/memory/memory.csv", "results/lia_mtr/probe/probe.json")
    if not evals and not lia_mtr:
        print("partial report: no evaluation finished", file=sys.stderr)
        return 1
    command = ["relin", "report", "--config", json.dumps({s: lookup(config, s) for s in SECTIONS}),
               "--configs", "params.yaml", *args.overlay, "--out", args.out]
    histories = [*found("results/teacher/*/history.csv", "results/opal/*/history.csv",
                        "results/hedgemamba/*/history.csv"),
                 *(f"lia_mtr-{Path(p).parent.name}={p}" for p in found("results/lia_mtr/tower/history.csv",
                                                                      "results/lia_mtr/llm/history.csv")),
                 *(f"lia_mtr-{Path(p).parent.parent.name}-{Path(p).parent.name}={p}"
                   for p in found("results/lia_mtr/align/*/history.csv", "results/lia_mtr/instruct/*/history.csv"))]
    optional = {"--history": histories,
                "--eval": [str(d / "metrics.json") for d in evals],
                "--items": [str(d / "items.csv") for d in evals if (d / "items.csv").is_file()],
                "--by-length": found("results/eval/*/accuracy_by_length.csv"),
                "--train-metrics": found("results/opal/*/train_metrics.json"),
                "--opal-layers": found("results/opal/gdn/layers.json"),
                "--hedgemamba-init": found("results/hedgemamba/init/check.json"),
                "--hedgemamba-decays": found("results/hedgemamba/*/decays.json"),
                "--speed": found("results/opal/speed.csv"),
                "--lia-mtr": lia_mtr}
    for flag, paths in optional.items():
        if paths:
            command += [flag, *paths]
    return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main())
