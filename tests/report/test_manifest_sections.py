"""Each paper's report manifest is listed from the params its stage declares (``manifest.SECTIONS``) and no other:
the stage refuses to read an undeclared section, so a listing that reached another paper's params failed the DAG."""
from pathlib import Path

import pytest
import yaml

from relin.config.params import lookup
from relin.manifest import SECTIONS, paper_files

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ["params.yaml", "workflow/configs/pretrained.yaml"]


def merged(*files: str) -> dict:
    def deep(into: dict, more: dict) -> dict:
        for key, value in more.items():
            into[key] = deep(dict(into.get(key) or {}), value) if isinstance(value, dict) else value
        return into
    out: dict = {}
    for name in files:
        deep(out, yaml.safe_load((ROOT / name).read_text()))
    return out


@pytest.mark.parametrize("overlay", CONFIGS)
@pytest.mark.parametrize("paper", sorted(SECTIONS))
def test_a_papers_manifest_reads_only_its_declared_sections(paper, overlay):
    params = merged(*dict.fromkeys(["params.yaml", overlay]))
    read = []

    def get(dotted: str):
        read.append(dotted)
        assert dotted in SECTIONS[paper], f"{paper}'s manifest read {dotted}, not among its sections"
        return lookup(params, dotted)

    paper_files(paper, get)
    assert read
