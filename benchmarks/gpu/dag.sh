#!/usr/bin/env bash
# The whole DAG under workflow/configs/h200.yaml on a lent H200, within one 10-minute call:
#   WHEELS=dag bash benchmarks/gpu/fetch_device_wheels.sh                     # here, once (snakemake, mlflow, ...)
#   bash benchmarks/gpu/dag.sh                                              # there, carrying .whl
# Jobs share the one GPU (at most GPU_JOBS of the gpu=1 rules at a time) and 16 cores; a failed job leaves the
# independent ones running (--keep-going). Into $OUT: the report, every metrics/speed JSON and table, the
# per-job benchmark TSVs and logs (dag-results.tar.gz), snakemake's log, and a table of job times; a partial run
# (DAG_TARGETS or the limit) the report of what finished (results/report-partial).
# RELIN_GIT_COMMIT names the commit (the lent machine gets the tree without .git). DAG_TARGETS (files, space-separated)
# runs a part of the DAG instead of the report, e.g. one paper's stages when a call cannot hold all three.
source benchmarks/gpu/env.sh
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
timeout "${DAG_LIMIT:-530}" snakemake --cores "$cores" --resources gpu="${GPU_JOBS:-6}" --keep-going --rerun-incomplete \
    ${DAG_TARGETS:-} --configfile workflow/configs/h200.yaml > "$OUT/snakemake.log" 2>&1
rc=$?
echo "snakemake rc $rc after $(( $(date +%s) - began )) s" | tee -a "$OUT/machine.txt"
grep -E "^(Error in rule|Finished job|[0-9]+ of [0-9]+ steps)" "$OUT/snakemake.log" | tail -5
# A partial DAG (DAG_TARGETS, or the limit) gets the report of what finished, beside the stage outputs.
[ -d results/report ] || python3 benchmarks/gpu/partial_report.py --overlay workflow/configs/h200.yaml \
    --out results/report-partial > "$OUT/partial-report.log" 2>&1
cp -r results/report* "$OUT/" 2>/dev/null
tar -czf "$OUT/dag-results.tar.gz" --ignore-failed-read logs results/benchmarks results/report* \
    $(find results -name "*.json" -o -name "*.csv" -o -name "*.png" | grep -v "/model/\|/checkpoints/") 2>/dev/null
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
