"""The teacher screen's pick as a config overlay for the DAG that follows it in the same call.

    python3 tools/gpu/screen_pick.py $OUT build/teacher-pick.yaml as_configured init_0.005 ...

Reads ``screen-<name>.json`` (``tools/gpu/teacher_screen.sh``) for each variant name, in the order given, and
writes the overrides of the variant whose MQAR key match formed first (a tie goes to the earlier name; a variant
that did not form, or failed, is never picked) as a YAML overlay of ``params.yaml``. When none formed, the overlay
is empty: the config stays as it is. Prints one line saying what was picked and why.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from relin.config.params import deep_merge

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cpu"))
from teacher_recall_screen import override  # noqa: E402  (the screen's own reading of KEY=VALUE)


def main() -> None:
    if len(sys.argv) < 4:
        sys.exit("usage: screen_pick.py SCREEN_DIR OVERLAY.yaml NAME [NAME ...]")
    screens, out, names = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    formed = []
    for order, name in enumerate(names):
        path = screens / f"screen-{name}.json"
        if not path.is_file():
            print(f"screen_pick: {name}: no {path} (the variant failed); not a candidate", file=sys.stderr)
            continue
        record = json.loads(path.read_text())
        steps = [run["formed_at"] for run in record["runs"]]
        if steps and all(step is not None for step in steps):
            formed.append((max(steps), order, name, record["overrides"]))
    overlay: dict = {}
    if formed:
        step, _, name, overrides = min(formed)
        for dotted in overrides:
            overlay = deep_merge(overlay, override(dotted)[1])
        print(f"screen_pick: {name} (key match formed at step {step}; {len(formed)} of {len(names)} variants "
              f"formed): {' '.join(overrides) or 'no overrides'}")
    else:
        print(f"screen_pick: no variant formed the key match ({', '.join(names)}); the config stays as it is")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(overlay, sort_keys=False) if overlay else "{}\n")


if __name__ == "__main__":
    main()
