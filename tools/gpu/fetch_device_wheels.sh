#!/usr/bin/env bash
# Download, here, the pure-Python and cp312 wheels that a lent GPU machine (Python 3.12, torch 2.11,
# no internet) lacks, into .whl/ (git-ignored); carry it with the call and `source tools/gpu/env.sh`.
#   WHEELS=kernels  fla 0.6.0 (kernel baselines) and compute-sanitizer (CUDA 13): tools/gpu/check.sh
#   WHEELS=dag      snakemake, mlflow (SQLite logging) and datasets with the parts of their dependency trees
#                   the GPU image does not have: tools/gpu/dag.sh (the DAG under workflow/configs/h200.yaml)
#   WHEELS=all      both, and deepspeed (built here, ops JIT)   [default]
#   WHEELS=public   fla-core 0.6.0, flash-qla 0.1.3 and tilelang 0.1.15 with the parts of its tree the GPU image
#                   lacks (apache-tvm-ffi, torch-c-dlpack-ext, z3-solver's libz3), the last four unpacked, pruned
#                   (z3's binary, cutlass/tools) and xz-packed into tilelang-bundle.tar.xz (~37 MB; the wheels are
#                   ~83 MB): benchmarks/gpu/gdn_public.py. On the machine, before env.sh:
#                   `[ -d /tmp/site/tilelang ] || { mkdir -p /tmp/site && tar xJf .whl/tilelang-bundle.tar.xz -C /tmp/site; }`
#   WHEELS=sanitizer  adds the compute-sanitizer wheel (~14 MB) to what .whl/ holds (after public: ~51 MB in all):
#                   tools/gpu/kernels_head.sh
# The 64 MiB a call may carry holds one of the first two (or public) at a time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
wheels=${WHEELS:-all}
[ "${KERNELS_ONLY:-0}" = 1 ] && wheels=kernels
case $wheels in kernels|dag|all|public|sanitizer) ;;
  *) echo "WHEELS=$wheels: expected kernels, dag, all, public or sanitizer" >&2; exit 2 ;; esac
fetch=(python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
       --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
       --platform manylinux2014_x86_64 --platform any -d .whl)
if [ "$wheels" = sanitizer ]; then
  "${fetch[@]}" --platform manylinux_2_25_x86_64 nvidia-cuda-sanitizer-api==13.0.85
  du -sh .whl
  exit 0
fi
rm -rf .whl
if [ "$wheels" = public ]; then
  "${fetch[@]}" fla-core==0.6.0 flash-qla==0.1.3
  bundle=$(mktemp -d)
  "${fetch[@]}" -d "$bundle/whl" tilelang==0.1.15 "apache-tvm-ffi>=0.1.11,<0.1.13" torch-c-dlpack-ext==0.1.5 \
    "z3-solver>=4.13.0,<4.15.5"
  mkdir "$bundle/site"
  for w in "$bundle"/whl/*.whl; do unzip -q -o "$w" -d "$bundle/site"; done
  rm -rf "$bundle"/site/z3_solver-*.data "$bundle/site/tilelang/3rdparty/cutlass/tools"
  ln -sf libz3.so.4.15 "$bundle/site/z3/lib/libz3.so"  # libtvm_compiler.so needs libz3.so.4.15 only
  tar cf - -C "$bundle/site" . | xz -9e -T"$(nproc)" > .whl/tilelang-bundle.tar.xz
  rm -rf "$bundle"
  du -sh .whl
  exit 0
fi
if [ "$wheels" != dag ]; then
  "${fetch[@]}" fla-core==0.6.0 flash-linear-attention==0.6.0 hjson
  "${fetch[@]}" --platform manylinux_2_25_x86_64 nvidia-cuda-sanitizer-api==13.0.85
fi
if [ "$wheels" != kernels ]; then
  "${fetch[@]}" datasets==5.2.0 dill multiprocess lm_eval==0.4.13 \
    pydantic==2.14.4 pydantic-core==2.50.5 annotated-types typing-inspection \
    mlflow==3.17.2 mlflow-skinny==3.17.2 mlflow-tracing==3.17.2 SQLAlchemy==2.0.58 alembic==1.20.1 Mako greenlet \
    opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-proto==1.45.2 \
    opentelemetry-semantic-conventions==0.66b2 sqlparse cachetools fastapi starlette importlib_metadata \
    lazy-importer databricks-sdk cryptography cffi pycparser tzdata \
    snakemake==9.27.1 conda-inject configargparse connection_pool docutils dpath gitpython gitdb smmap \
    humanfriendly immutables jsonschema jsonschema-specifications referencing rpds-py nbformat fastjsonschema \
    jupyter-core traitlets platformdirs pulp smart-open snakemake-interface-common snakemake-interface-executor-plugins \
    snakemake-interface-logger-plugins snakemake-interface-report-plugins snakemake-interface-scheduler-plugins \
    snakemake-interface-storage-plugins argparse-dataclass sqlmodel tenacity throttler yte
fi
[ "$wheels" = all ] && DS_BUILD_OPS=0 python3 -m pip wheel -q --no-deps deepspeed==0.19.8 -w .whl
du -sh .whl
