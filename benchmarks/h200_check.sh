# The GPU verification of the kernels, in stages that each fit one device call (<= 10 minutes):
#   bash benchmarks/h200_check.sh tests            # 3.5 min once Triton's cache is warm; a fresh machine
#                                                  # compiles everything first (> 9 min: run it twice, or by file)
#   bash benchmarks/h200_check.sh dla msr          # ~4 min
#   bash benchmarks/h200_check.sh gdn              # ~4 min (fla's and relin's autotuning on a fresh machine)
# Logs and the benchmark JSON go to $OUT (the device tool returns them) and to benchmarks/results/.
# Every stage runs under its own timeout so that a slow one still leaves the others' output.
source benchmarks/device_env.sh
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
OUT=${OUT:-benchmarks/results}
workers=$(( $(nproc) - 1 ))
for stage in "$@"; do
    case $stage in
        tests)
            (cd tests/kernels && timeout 540 python3 -m pytest . -n "$workers" -p no:cacheprovider -p no:benchmark \
                -q --tb=short -rf --durations=10) 2>&1 | tee "$OUT/kernel-tests.log" | tail -40 ;;
        gdn|dla|msr)
            timeout 420 python3 benchmarks/kernels.py --only "$stage" 2>&1 | grep -v "warn" | tee "$OUT/kernels-$stage.log" | tail -16 ;;
        profile)
            # PROFILE_ARGS replaces the default selection, e.g. "--only dla --host" or
            # "--only dla --check --set decayed_linear_attn.triton_fwd.CHUNK_TILE=128"
            timeout 300 python3 benchmarks/kernel_profile.py ${PROFILE_ARGS:---only gdn,dla,msr} 2>&1 \
                | tee "$OUT/profile.log" | sed -n '/^case/,$p' ;;
        *) echo "unknown stage '$stage': expected tests, gdn, dla, msr or profile" >&2; exit 2 ;;
    esac
done
