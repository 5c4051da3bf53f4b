#!/usr/bin/env bash
# The h200 run that decides the claims, in back-to-back 10-minute calls of one warm machine, the same command each
# time (the machine goes back 30 s after a call returns, and with it the run):
#   WHEELS=dag bash tools/gpu/fetch_device_wheels.sh      # here, once
#   bash tools/gpu/h200_run.sh                           # there, carrying .whl; again as soon as it returns
# A call on a fresh machine runs the compiled loop's GPU test beside the Qwen3 teacher screen (teacher_screen.sh:
# four variants, two seeds each, trained eagerly through the short-row stages; the first variant to form MQAR's key
# match on both seeds is picked as an overlay; the teachers train eagerly if the compiled loop failed its test), then
# starts the whole DAG in its own session (dag.sh). Later calls follow the DAG and pack what exists. The call that
# finds it ended, whatever its rc (`bash tools/gpu/dag.sh` reruns failed jobs), measures the teacher's training
# throughput (teacher_train.py: compiled, then compile_mode max-autotune-no-cudagraphs) with the time left.
# CALL_S (570) bounds a call's own work. Prefix the call with what `python -m relin.envelope` prints here
# (RELIN_GIT_COMMIT, RELIN_GIT_DIRTY): the tree comes without .git, and teacher_train.py refuses an unknown one.
source tools/gpu/env.sh
set -uo pipefail
OUT=${OUT:-build/benchmarks}
mkdir -p "$OUT" build
call_s=${CALL_S:-570}
if [ ! -f build/dag-overlays ]; then
  (timeout 300 python3 -m pytest -q -p no:cacheprovider -o addopts="" tests/train/test_loop.py -k compiled \
      > "$OUT/gpu-test.log" 2>&1; echo "gpu test rc $?" >> "$OUT/gpu-test.log") &
  STEPS=${STEPS:-500} SCREEN_LIMIT=${SCREEN_LIMIT:-240} PICK=build/teacher-pick.yaml bash tools/gpu/teacher_screen.sh
  wait
  tail -n 4 "$OUT/gpu-test.log"
  [ -f build/teacher-pick.yaml ] || echo "{}" > build/teacher-pick.yaml
  overlays=build/teacher-pick.yaml
  if ! grep -q "gpu test rc 0" "$OUT/gpu-test.log"; then
    overlays="$overlays build/screen-eager.yaml"  # the screen's own overlay: teacher.train.compile false
    echo "the compiled loop failed its GPU test: the teachers train eagerly"
  fi
  echo "$overlays" > build/dag-overlays
  (cd "$OUT" && tar -czf screen.tar.gz screen-* gpu-test.log 2>/dev/null && rm -f screen-* gpu-test.log)
fi
if [ ! -f build/dag.rc ]; then
  # packing after the wait (partial report, tarball) takes up to a minute
  DAG_OVERLAYS="$(cat build/dag-overlays)" DAG_LIMIT=$(( call_s - SECONDS - 60 )) bash tools/gpu/dag.sh
fi
if [ -f build/dag.rc ]; then
  for mode in compiled autotuned; do
    [ -f "build/mfu-$mode" ] && continue
    # a compilation of the 12 x 768 teacher takes ~1 minute, an autotuned one several
    [ $(( call_s - SECONDS )) -gt $([ $mode = compiled ] && echo 150 || echo 330) ] || break
    python3 benchmarks/gpu/teacher_train.py --only qwen3-100m-hd128 --modes $mode --batch 32 --steps 30 \
        --log-every 10 --out build --json "teacher_train-$mode.json" && touch "build/mfu-$mode"
    cp "build/teacher_train-$mode.json" "$OUT/" 2>/dev/null
  done
fi
