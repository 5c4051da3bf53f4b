#!/usr/bin/env bash
# Download, here, the pure-Python and cp312 wheels that a lent GPU machine (Python 3.12, torch 2.11,
# no internet) lacks, into .whl/ (git-ignored); carry it with the call and `source benchmarks/gpu/env.sh`.
# fla 0.6.0 (kernel baselines), compute-sanitizer (nvidia-cuda-sanitizer-api, CUDA 13), deepspeed (built here,
# ops JIT), datasets, and mlflow with the parts of its dependency tree the GPU image does not have (SQLite
# logging only). KERNELS_ONLY=1 fetches the first two alone (what benchmarks/gpu/check.sh needs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
fetch=(python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
       --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
       --platform manylinux2014_x86_64 --platform any -d .whl)
"${fetch[@]}" fla-core==0.6.0
"${fetch[@]}" --platform manylinux_2_25_x86_64 nvidia-cuda-sanitizer-api==13.0.85
if [ "${KERNELS_ONLY:-0}" = 1 ]; then du -sh .whl; exit 0; fi
"${fetch[@]}" flash-linear-attention==0.6.0 hjson datasets==5.2.0 dill multiprocess \
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types typing-inspection \
  mlflow==3.17.2 mlflow-skinny==3.17.2 mlflow-tracing==3.17.2 SQLAlchemy==2.0.58 alembic==1.20.1 Mako greenlet \
  opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-proto==1.45.2 \
  opentelemetry-semantic-conventions==0.66b2 sqlparse cachetools fastapi starlette importlib_metadata \
  lazy-importer databricks-sdk cryptography cffi pycparser tzdata
DS_BUILD_OPS=0 python3 -m pip wheel -q --no-deps deepspeed==0.19.8 -w .whl
du -sh .whl
