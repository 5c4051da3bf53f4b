#!/usr/bin/env bash
# The kernels at HEAD on a lent GPU (issue #66) in few calls: the kernel tests, the compute-sanitizer memcheck sweep
# split over processes, and gdn_public (relin; relin_cp, its serial passes on segments; FlashQLA; fla; one process).
#   bash tools/gpu/kernels_head.sh side bench   # one fresh-machine call, ~9.5 min
#   bash tools/gpu/kernels_head.sh memcheck     # the next call, back to back on the warm machine
# Stages:
#   side      side by side (16 cores, one GPU, nothing timed), each under $SIDE_LIMIT s: pytest of $TEST_FILES in
#             tests/kernels (-n $TEST_WORKERS), the memcheck parts of $SIDE_MEMCHECK (default the segment
#             kernels), FlashQLA's TileLang compiles (three processes, as gdn_public.sh warmall), relin's (relin_cp)
#             and fla's at the benchmark's cells; then Triton's cached autotuning choices are dropped, so the
#             benchmark tunes on an idle GPU;
#   bench     gdn_public on the otherwise idle GPU, with what is left of $LIMIT s (and $BENCH_ARGS);
#   memcheck  the memcheck parts of $MEMCHECK (default every other op, gdn and dla in two halves of their head
#             dims), one process each, under $MEMCHECK_LIMIT s.
# Memcheck parts are separated by semicolons, each memcheck.py's arguments (ops, --dims). Needs .whl from
# `WHEELS=public bash tools/gpu/fetch_device_wheels.sh` and the compute-sanitizer wheel
# (`WHEELS=sanitizer`), carried. Prefix with what `python -m relin.envelope` prints here. Files go to $OUT (at most
# 8): kernel-tests.log, memcheck.log, warm.log, bench.log, gdn_public.json, summary.txt; the summary prints last.
set -o pipefail
OUT=${OUT:-build/benchmarks}
mkdir -p "$OUT"
LIMIT=${LIMIT:-570}
SIDE_LIMIT=${SIDE_LIMIT:-360}
MEMCHECK_LIMIT=${MEMCHECK_LIMIT:-420}
TEST_WORKERS=${TEST_WORKERS:-8}
SIDE_MEMCHECK=${SIDE_MEMCHECK:-gdn_segments}
half1=16x16,16x256,24x48,32x100,48x24
half2=64x32,100x64,128x128,256x16,256x256
MEMCHECK=${MEMCHECK:-gdn --dims $half1;gdn --dims $half2;dla --dims $half1;dla --dims $half2;msr decode step}
# The gated delta rule's files first (collection order is the order of dispatch); -v prints one line per test as it
# ends, so a run cut by its limit still says what passed.
TEST_FILES=${TEST_FILES:-test_gated_delta_rule.py test_cuda_graphs.py test_chunk_tables.py test_autotune_lookup.py
  test_decayed_linear_attn.py test_decode_attention.py test_multiscale_retention.py test_rms_norm.py test_short_conv.py}
logs=/tmp/kernels_head_logs
mkdir -p "$logs"
if [ ! -d /tmp/site/tilelang ]; then
  mkdir -p /tmp/site && tar xJf .whl/tilelang-bundle.tar.xz -C /tmp/site || exit 1
fi
# shellcheck disable=SC1091
source tools/gpu/env.sh
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
[ -x "$SANITIZER" ] || SANITIZER=$(ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
echo "setup done at ${SECONDS}s; sanitizer: ${SANITIZER:-none};" \
  "$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader)"

memcheck_parts() {  # time limit, comma-separated parts; one background process each, pids appended to $pids
  local limit=$1 part name
  IFS=';' read -ra parts <<< "$2"
  for part in "${parts[@]}"; do
    name=$(echo "$part" | tr -c 'a-z0-9_\n' '-' | cut -c1-40)
    # shellcheck disable=SC2086
    timeout "$limit" "$SANITIZER" --tool memcheck --error-exitcode 1 python3 benchmarks/gpu/memcheck.py $part \
      > "$logs/memcheck-$name.log" 2>&1 &
    pids+=($!)
  done
}

memcheck_summary() {
  for f in "$logs"/memcheck-*.log; do
    echo "$(basename "$f"): $(grep -c '^ok ' "$f") ok; $(grep -E '^memcheck sweep|ERROR SUMMARY' "$f" | tr '\n' ' ')"
    grep -E "NOT FINITE|Invalid|out of bounds|Error" "$f" | grep -v "ERROR SUMMARY" | head -3
  done
}

for stage in "$@"; do
  pids=()
  case $stage in
    side)
      # shellcheck disable=SC2086
      (cd tests/kernels && timeout "$SIDE_LIMIT" python3 -m pytest $TEST_FILES -n "$TEST_WORKERS" --dist load \
        -p no:cacheprovider -p no:benchmark -v --tb=short -rfs --durations=10) > "$OUT/kernel-tests.log" 2>&1 &
      pids+=($!)
      memcheck_parts "$SIDE_LIMIT" "$SIDE_MEMCHECK"
      for cells in 0 4 5; do
        timeout "$SIDE_LIMIT" python3 benchmarks/gpu/gdn_public.py --warm-only flash_qla --cells $cells \
          > "$logs/warm-qla-$cells.log" 2>&1 &
        pids+=($!)
      done
      for lib in relin_cp fla_triton+tl_dqkwg; do  # relin_cp compiles every kernel relin runs and the segments'
        timeout "$SIDE_LIMIT" python3 benchmarks/gpu/gdn_public.py --warm-only $lib > "$logs/warm-$lib.log" 2>&1 &
        pids+=($!)
      done
      for pid in "${pids[@]}"; do wait "$pid"; echo "pid $pid rc=$? at ${SECONDS}s" >> "$logs/rc.log"; done
      echo "side jobs done at ${SECONDS}s"
      for f in "$logs"/warm-*.log "$logs/rc.log"; do echo "=== $f"; cat "$f"; done > "$OUT/warm.log"
      find ~/.triton/cache -name "*.autotune.json" -delete 2>/dev/null
      ;;
    bench)
      left=$((LIMIT - SECONDS))
      echo "bench starts at ${SECONDS}s with ${left}s left"
      # shellcheck disable=SC2086
      timeout "$left" python3 benchmarks/gpu/gdn_public.py --out "$OUT/gdn_public.json" --budget-s $((left - 40)) \
        ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
      echo "bench rc=$? at ${SECONDS}s"
      ;;
    memcheck)
      memcheck_parts "$MEMCHECK_LIMIT" "$MEMCHECK"
      for pid in "${pids[@]}"; do wait "$pid"; echo "pid $pid rc=$? at ${SECONDS}s" >> "$logs/rc.log"; done
      echo "memcheck done at ${SECONDS}s"
      ;;
    *) echo "unknown stage '$stage': expected side, bench or memcheck" >&2; exit 2 ;;
  esac
done

for f in "$logs"/memcheck-*.log; do echo "=== $f"; cat "$f"; done > "$OUT/memcheck.log" 2>/dev/null
{
  if [ -f "$OUT/kernel-tests.log" ]; then
    echo "== kernel tests"; tail -1 "$OUT/kernel-tests.log"
    echo "$(grep -c ' PASSED ' "$OUT/kernel-tests.log") passed, $(grep -c ' FAILED ' "$OUT/kernel-tests.log") failed," \
      "$(grep -c ' SKIPPED ' "$OUT/kernel-tests.log") skipped (per-test lines)"
    grep -E "^(FAILED|ERROR)| FAILED " "$OUT/kernel-tests.log" | cut -c1-250 | head -20
  fi
  echo "== memcheck"; memcheck_summary
  [ -f "$logs/rc.log" ] && { echo "== exit codes"; tr '\n' ' ' < "$logs/rc.log"; echo; }
  if [ -f "$OUT/warm.log" ]; then
    echo "== warm-up failures"; grep -h "^warm " "$logs"/warm-*.log | grep -v " ok$" | cut -c1-200 | head -8
  fi
  [ -f "$OUT/bench.log" ] && { echo "== gdn_public"; sed -n '/^wall ms/,$p' "$OUT/bench.log" | grep -v "^warn"; }
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
