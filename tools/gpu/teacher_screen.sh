#!/usr/bin/env bash
# Does the h200 Qwen3 teacher's MQAR key match form within its short-row stages, and under which settings? Several
# variants of workflow/configs/h200.yaml train at once on the one GPU (benchmarks/cpu/teacher_recall_screen.py,
# the first STEPS steps of teacher.train, training accuracy every 50 steps; formed = 0.8), then one table.
#   bash tools/gpu/teacher_screen.sh                        # there, carrying .whl (WHEELS=dag)
#   PICK=build/teacher-pick.yaml bash tools/gpu/teacher_screen.sh   # and the overlay of the first to form
# VARIANTS: name=KEY=VALUE[;KEY=VALUE...] separated by spaces; ARCH (qwen3), STEPS (1300), SEEDS ("0 1"); SCREEN_LIMIT
# (seconds) stops the variants still training then. The variants train eagerly: five compilations at once would
# cost more than the steps they save.
source tools/gpu/env.sh
set -uo pipefail
OUT=${OUT:-build/benchmarks}
mkdir -p "$OUT"
arch=${ARCH:-qwen3}
# On the CPU (width 128, lr 1e-3, these short stages; docs/measurements/teacher-niah-cpu.md at de9179e) the match
# formed later with depth; at 12 layers with 128 rows a step, whether it formed by step 450 turned on the seed (init
# 0.01 and 0.02 each for one of two seeds), with 256 rows (the overlay's now) it formed at step 150 for both: a
# variant is judged on every seed of SEEDS.
variants=${VARIANTS:-"as_configured=
rows_512=teacher.train.curriculum=[{\"until_step\":200,\"max_len\":16,\"batch_size\":512},{\"until_step\":500,\"max_len\":32,\"batch_size\":512},{\"until_step\":1300,\"max_len\":64},{\"until_step\":2200,\"max_len\":256}]
init_0.02=teacher.models.qwen3.initializer_range=0.02
heads_12x64=teacher.models.qwen3.num_attention_heads=12;teacher.models.qwen3.head_dim=64"}
read -ra seeds <<< "${SEEDS:-0 1}"
[ -d results/data/synth_text ] || snakemake --cores 4 results/data/synth_text --configfile workflow/configs/h200.yaml \
    > "$OUT/synth_text.log" 2>&1 || { echo "synth_text failed: $OUT/synth_text.log"; exit 1; }
mkdir -p build && echo "teacher: {train: {compile: false}}" > build/screen-eager.yaml
pids=()
for variant in $variants; do
  name=${variant%%=*}
  sets=()
  IFS=';' read -ra pairs <<< "${variant#*=}"
  for pair in "${pairs[@]}"; do sets+=(--set "$pair"); done
  timeout "${SCREEN_LIMIT:-3600}" python3 benchmarks/cpu/teacher_recall_screen.py --overlay workflow/configs/h200.yaml \
      --overlay build/screen-eager.yaml --data results/data/synth_text \
      --arch "$arch" --steps "${STEPS:-1300}" --seeds "${seeds[@]}" --jobs "${#seeds[@]}" ${sets[@]+"${sets[@]}"} \
      --out "$OUT/screen-$name.json" \
      > "$OUT/screen-$name.log" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"
# timeout signals its own process group: a variant's relin processes end with it; this sweeps what is left
for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null; done
names=()
for variant in $variants; do
  name=${variant%%=*}
  names+=("$name")
  [ -f "$OUT/screen-$name.json" ] || { echo "variant $name failed: $(tail -n 1 "$OUT/screen-$name.log")"; }
done
python3 - "$OUT" <<'PY'
import json, pathlib, sys
print("| variant | overrides | seed | formed at | accuracy every 250 steps | s |\n|---|---|---|---|---|---|")
for path in sorted(pathlib.Path(sys.argv[1]).glob("screen-*.json")):
    record = json.loads(path.read_text())
    for run in record["runs"]:
        acc = " ".join(f"{a:.2f}" for step, a in run["accuracy"].items() if int(step) % 250 == 0)
        print(f"| {path.stem.removeprefix('screen-')} | {' '.join(record['overrides'])} | {run['seed']} "
              f"| {run['formed_at'] or 'no'} "
              f"| {acc} | {run['seconds']:.0f} |")
PY
[ -z "${PICK:-}" ] || python3 tools/gpu/screen_pick.py "$OUT" "$PICK" "${names[@]}"
