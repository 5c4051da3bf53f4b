# The kernels' GPU verification, in stages; each runs under its own timeout so that a slow one still leaves the
# others' logs. Logs and kernels.json go to $OUT (the device tool returns them), else to benchmarks/results/local/.
#   bash tools/gpu/check.sh sweep memcheck     # head-dim sweeps, CUDA graphs, then the sanitizer sweep
#   bash tools/gpu/check.sh tests              # every kernel test (a fresh machine compiles for minutes)
#   bash tools/gpu/check.sh bench              # benchmarks/gpu/kernel_bench.py (ONLY=dla,gdn,msr by default)
#   PROFILE_ARGS="--only dla --host" bash tools/gpu/check.sh profile
# The lent machine gets the tree without .git: prefix the call with what `python -m relin.envelope` prints here
# (RELIN_GIT_COMMIT, RELIN_GIT_DIRTY), or kernel_bench.py refuses to write kernels.json.
source tools/gpu/env.sh
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
OUT=${OUT:-build/benchmarks}
mkdir -p "$OUT"
workers=$(( $(nproc) - 1 ))
pytest_run() {  # log name, time limit, pytest arguments
    local log=$1 limit=$2
    shift 2
    (cd tests/kernels && timeout "$limit" python3 -m pytest . -n "$workers" --dist load -p no:cacheprovider -p no:benchmark \
        -q --tb=short -rfs --durations=10 "$@") 2>&1 | tee "$OUT/$log" | tail -25
}
for stage in "$@"; do
    case $stage in
        sweep) pytest_run sweep-tests.log "${SWEEP_LIMIT:-330}" -k "sweep or small_and_odd or odd_head or captured or bf16" ;;
        tests) pytest_run kernel-tests.log "${TESTS_LIMIT:-540}" ;;
        memcheck)
            timeout "${MEMCHECK_LIMIT:-240}" "$SANITIZER" --tool memcheck --error-exitcode 1 \
                python3 benchmarks/gpu/memcheck.py 2>&1 | tee "$OUT/memcheck.log" | grep -v "^ok " | tail -20 ;;
        bench)
            timeout "${BENCH_LIMIT:-420}" python3 benchmarks/gpu/kernel_bench.py --only "${ONLY:-dla,gdn,msr}" --out "$OUT" \
                2>&1 | grep -v "warn" | tee "$OUT/kernels.log" | sed -n '/^op /,$p' ;;
        profile)
            timeout "${PROFILE_LIMIT:-300}" python3 benchmarks/gpu/kernel_profile.py ${PROFILE_ARGS:---only gdn,dla,msr} \
                2>&1 | tee "$OUT/profile.log" | sed -n '/^case/,$p' ;;
        *) echo "unknown stage '$stage': expected sweep, tests, memcheck, bench or profile" >&2; exit 2 ;;
    esac
done
