# Source on a lent GPU machine (no internet): installs the wheels carried in .whl/ (tools/gpu/fetch_device_wheels.sh)
# and relin itself into /tmp, and puts them on PYTHONPATH; SANITIZER is compute-sanitizer, from the carried wheel
# when there is one. Usage: `source tools/gpu/env.sh`.
# Installs only what changed: a later source (dag.sh after a benchmark, or the next call on the warm machine while
# the DAG an earlier call started still runs) must not reinstall under a running process.
[ "${RELIN_GPU_ENV:-}" = "$PWD" ] && return 0
set -e
stamp=$(cat .whl/*.whl pyproject.toml $(find src -name "*.py" | sort) 2>/dev/null | md5sum | cut -c1-32)
if [ "$(cat /tmp/relin-site/.stamp 2>/dev/null)" != "$stamp" ]; then
  if ls .whl/*.whl > /dev/null 2>&1; then  # none carried: relin alone
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  fi
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/relin-site .
  echo "$stamp" > /tmp/relin-site/.stamp
fi
export PYTHONPATH=/tmp/relin-site:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export PATH=/tmp/site/bin:/tmp/relin-site/bin:$PATH
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=true
SANITIZER=/tmp/site/nvidia/cuda_sanitizer_api/bin/compute-sanitizer
[ -x "$SANITIZER" ] || SANITIZER=$(command -v compute-sanitizer || true)
export SANITIZER RELIN_GPU_ENV=$PWD
set +e
