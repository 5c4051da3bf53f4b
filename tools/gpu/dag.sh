#!/usr/bin/env bash
# The whole DAG under workflow/configs/h200.yaml on a lent H200, across one or more 10-minute calls:
#   WHEELS=dag bash tools/gpu/fetch_device_wheels.sh                     # here, once (snakemake, mlflow, ...)
#   bash tools/gpu/dag.sh                                              # there, carrying .whl; again to follow
# Snakemake runs in its own process session, which outlives the call on the warm machine: a call waits for it at
# most DAG_LIMIT seconds, packs what exists, and returns; the next call made back to back (the machine stays warm
# 30 s) attaches to the same run and waits again. When no run is alive (it ended, or a fresh machine), the call
# starts one: Snakemake reruns incomplete jobs, whose training stages resume from their checkpoints (checkpoints/,
# outside the jobs' outputs). Every call packs what exists so far (report, metrics, logs, the MLflow store), so a
# machine taken away loses no result.
# Jobs share the one GPU (at most GPU_JOBS of the gpu=1 rules at a time) and 16 cores; a failed job leaves the
# independent ones running (--keep-going). Into $OUT: the report's summary, every metrics/speed JSON and table, the
# reports, per-job benchmark TSVs and logs (dag-results.tar.gz), snakemake's log, and a table of job times; a partial
# run (DAG_TARGETS or the limit) the report of what finished (results/report-partial).
# RELIN_GIT_COMMIT names the commit (the lent machine gets the tree without .git). DAG_TARGETS (files, space-separated)
# runs a part of the DAG instead of the report, e.g. one paper's stages when a call cannot hold all three;
# DAG_OVERLAYS (config files, space-separated) are merged over the h200 overlay.
source tools/gpu/env.sh
set -uo pipefail
cores=$(nproc)  # before OMP_NUM_THREADS is set: nproc reports that instead of the cores
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-build/benchmarks}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__,
'transformers', transformers.__version__)"
  echo "commit ${RELIN_GIT_COMMIT:-unknown}"; } | tee "$OUT/machine.txt"
began=$(date +%s)
calls=$(( $(cat build/dag-calls 2>/dev/null || echo 0) + 1 )); mkdir -p build; echo "$calls" > build/dag-calls
if [ -f build/dag.pid ] && kill -0 "$(cat build/dag.pid)" 2>/dev/null; then
  echo "call $calls: following the DAG an earlier call started" | tee -a "$OUT/machine.txt"
else
  [ -d .snakemake/locks ] && [ -n "$(ls -A .snakemake/locks 2>/dev/null)" ] && \
      snakemake --unlock --configfile workflow/configs/h200.yaml > /dev/null 2>&1
  echo "call $calls: starting the DAG" | tee -a "$OUT/machine.txt"
  rm -f build/dag.rc
  setsid bash -c "snakemake --cores $cores --resources gpu=${GPU_JOBS:-6} --keep-going --rerun-incomplete \
      ${DAG_TARGETS:-} --configfile workflow/configs/h200.yaml ${DAG_OVERLAYS:-} > build/snakemake-$calls.log 2>&1;
      echo \$? > build/dag.rc" < /dev/null > /dev/null 2>&1 &
  echo $! > build/dag.pid
fi
while kill -0 "$(cat build/dag.pid)" 2>/dev/null && [ $(( $(date +%s) - began )) -lt "${DAG_LIMIT:-540}" ]; do
  sleep 5
done
cat build/snakemake-*.log > "$OUT/snakemake.log" 2>/dev/null
if [ -f build/dag.rc ]; then
  rc=$(cat build/dag.rc)
  echo "snakemake ended, rc $rc, after $(( $(date +%s) - began )) s of this call" | tee -a "$OUT/machine.txt"
else
  rc=124
  echo "the DAG goes on in the background: run dag.sh again within 30 s, on this machine, to follow it" \
      | tee -a "$OUT/machine.txt"
fi
grep -E "^(Error in rule|Finished job|[0-9]+ of [0-9]+ steps)" "$OUT/snakemake.log" | tail -5
# A partial DAG (DAG_TARGETS, or the limit) gets the report of what finished, beside the stage outputs.
[ -d results/report ] || python3 tools/gpu/partial_report.py --overlay workflow/configs/h200.yaml \
    --out results/report-partial > "$OUT/partial-report.log" 2>&1
# $OUT brings back 8 files: the reports' summaries beside the tarball that holds everything
for report in results/report*; do [ -f "$report/summary.md" ] && cp "$report/summary.md" "$OUT/${report#results/}.md"; done
tar -czf "$OUT/dag-results.tar.gz" --ignore-failed-read logs results/benchmarks results/report* mlflow.db mlruns \
    $(find results -name "*.json" -o -name "*.csv" -o -name "*.png" | grep -v "/model/\|/checkpoints/") \
    $(find results/lia_mtr/mme -maxdepth 2 -name answers 2>/dev/null) 2>/dev/null
python3 - <<'EOF'
import csv, glob
rows = []
for path in glob.glob("results/benchmarks/**/*.tsv", recursive=True):
    with open(path) as f:
        row = next(csv.DictReader(f, delimiter="\t"))
    rows.append((float(row["s"]), path.removeprefix("results/benchmarks/").removesuffix(".tsv")))
print("job seconds")
for s, name in sorted(rows, reverse=True):
    print(f"{name:40s} {s:8.1f}")
EOF
for log in logs/*.log logs/*/*.log logs/*/*/*.log; do
    if grep -q "Traceback\|Error" "$log" 2>/dev/null; then echo "== $log"; grep -B2 -A3 "Error" "$log" | tail -8; fi
done
exit $rc
