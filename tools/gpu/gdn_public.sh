#!/usr/bin/env bash
# One device call for issue #51: relin's GDN against FlashQLA and fla (gdn_public.py), and the T=1 rounding study
# (gdn_t1_rounding.py). Needs .whl from `WHEELS=public bash tools/gpu/fetch_device_wheels.sh`, carried.
#   bash tools/gpu/gdn_public.sh [stages]   # stages: warm (FlashQLA's TileLang compiles, in the background
#                                           # while t1 runs), t1, bench; default "warm t1 bench"
#   bash tools/gpu/gdn_public.sh warmall bench   # fresh machine, no t1: every library's compiles at once
#       (FlashQLA in three processes, one per kernel family: dense B=1, B=8, varlen; relin and fla beside them),
#       then Triton's cached autotuning choices are dropped so the benchmark tunes on an otherwise idle GPU
# A fresh machine spends minutes compiling (TileLang with nvcc, Triton with autotuning); a second call on the warm
# machine reuses both caches. Files go to $OUT (else benchmarks/results/local). LIMIT: seconds for the whole call.
# Prefix the call with what `python -m relin.envelope` prints here (the tree comes without .git; the benchmarks
# refuse an unknown one).
set -o pipefail
OUT=${OUT:-benchmarks/results/local}
mkdir -p "$OUT"
LIMIT=${LIMIT:-570}
stages=${*:-warm t1 bench}
if [ ! -d /tmp/site/tilelang ]; then
  mkdir -p /tmp/site && tar xJf .whl/tilelang-bundle.tar.xz -C /tmp/site || exit 1
fi
# shellcheck disable=SC1091
source tools/gpu/env.sh
echo "setup done at ${SECONDS}s; nvcc: $(command -v nvcc)"
python3 -c "import tilelang, flash_qla, fla; print('tilelang', tilelang.__version__, 'flash_qla', flash_qla.__version__)" \
  2>&1 | tail -4
warm_pid=
if [[ " $stages " == *" warm "* ]]; then
  timeout 330 python3 benchmarks/gpu/gdn_public.py --warm-only flash_qla > "$OUT/warm_qla.log" 2>&1 &
  warm_pid=$!
fi
if [[ " $stages " == *" warmall "* ]]; then
  pids=()
  for cells in 0 4 5; do
    timeout 300 python3 benchmarks/gpu/gdn_public.py --warm-only flash_qla --cells $cells >> "$OUT/warm_qla.log" 2>&1 &
    pids+=($!)
  done
  for lib in relin fla_triton+tl_dqkwg; do
    timeout 300 python3 benchmarks/gpu/gdn_public.py --warm-only $lib >> "$OUT/warm_triton.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; echo "warm pid $pid rc=$?"; done
  find ~/.triton/cache -name "*.autotune.json" -delete
  echo "warmall done at ${SECONDS}s"
  grep "^warm " "$OUT/warm_qla.log" "$OUT/warm_triton.log" | grep -v " ok$" | cut -c1-300
fi
if [[ " $stages " == *" t1 "* ]]; then
  timeout 200 python3 benchmarks/gpu/gdn_t1_rounding.py --out "$OUT" 2>&1 | tee "$OUT/t1.log" | sed -n '/^ *T h0/,$p'
fi
if [ -n "$warm_pid" ]; then
  wait "$warm_pid"
  echo "warm rc=$? at ${SECONDS}s"
  grep -c " ok$" "$OUT/warm_qla.log"
  grep -v " ok$" "$OUT/warm_qla.log" | tail -8
fi
if [[ " $stages " == *" bench "* ]]; then
  left=$((LIMIT - SECONDS))
  echo "bench starts at ${SECONDS}s with ${left}s left"
  timeout "$left" python3 benchmarks/gpu/gdn_public.py --out "$OUT/gdn_public.json" --budget-s $((left - 60)) \
    2>&1 | tee "$OUT/bench.log" | grep -v "^warn" | sed -n '/^cell /,$p'
  echo "bench rc=$? at ${SECONDS}s"
fi
