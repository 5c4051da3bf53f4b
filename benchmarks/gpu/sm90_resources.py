"""Registers, spills (stack bytes per thread) and shared memory of relin's chunked kernels at sm_90, compiled on
this machine without a GPU (zero device time): every autotuning config of the gated delta rule and decayed
linear attention kernels at the given head dims, so a kernel that does not compile for Hopper shows up here first.

Usage: ``python benchmarks/gpu/sm90_resources.py [bf16|fp32] [K V]`` (default bf16, K = V = 128). The local Triton may
differ from the device's (3.6 on the H200 machines), so take the numbers as indicative.
"""
from __future__ import annotations

import inspect
import os
import subprocess
import sys
import tempfile

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from relin.kernels.common.triton_utils import tile
from relin.kernels.decayed_linear_attn import triton_bwd as dla_bwd
from relin.kernels.decayed_linear_attn import triton_fwd as dla_fwd
from relin.kernels.gated_delta_rule import triton_bwd as gdn_bwd
from relin.kernels.gated_delta_rule import triton_fwd as gdn_fwd
from relin.kernels.gated_delta_rule import triton_segments as gdn_segments
from relin.kernels.gated_delta_rule.segments import TRUNCATION_LOG_BOUND

CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
TARGET = GPUTarget("cuda", 90, 32)
H, BT = 16, 64
INDEX = dict(cu_seqlens="*i64", chunk_indices="*i32", chunk_offsets="*i64")


def resources(kernel, dtype, pointers, constexprs, warps, stages) -> str:
    """Compile ``kernel`` for sm_90; other pointers default to ``dtype``; return its resource line."""
    fn = kernel.fn if hasattr(kernel, "configs") else kernel
    params = list(inspect.signature(fn.fn).parameters)
    scalars = {"T": "i32", "WIDTH": "i32", "TOTAL": "i32", "scale": "fp32"}
    signature = {p: "constexpr" if p in constexprs else scalars.get(p) or pointers.get(p, "*" + dtype) for p in params}
    source = ASTSource(fn=fn, signature=signature,
                       constexprs={(params.index(name),): value for name, value in constexprs.items()
                                   if name in params})
    try:
        compiled = triton.compile(source, target=TARGET, options=dict(num_warps=warps, num_stages=stages))
    except Exception as error:  # noqa: BLE001 - e.g. out of shared memory: reported, not fatal
        return f"FAIL {type(error).__name__}: {str(error)[:300]}"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        dump = subprocess.run([CUOBJDUMP, "--dump-resource-usage", cubin.name], capture_output=True, text=True).stdout
    usage = dict(item.split(":") for line in dump.splitlines() if "REG:" in line for item in line.split()
                 if item.startswith(("REG:", "STACK:")))
    regs, stack = usage.get("REG", "?"), usage.get("STACK", "?")
    return f"regs {regs:>3s}  stack {stack:>5s} B  smem {compiled.metadata.shared:6d} B"


def configs(kernel):
    if not hasattr(kernel, "configs"):
        return [({}, 4, 2)]
    return [(c.kwargs, c.num_warps, c.num_stages) for c in kernel.configs]


def gdn_rows(dtype, K, V):
    f32 = "*fp32"
    base = dict(H=H, K=K, V=V, BT=BT, BK=tile(K, 256), PRECISION="ieee" if dtype == "fp32" else "tf32", WIDEN=False)
    segments = dict(b_cum=f32, chunk_bound=f32, carry=f32, trans=f32, fallback="*i32", seg_cu="*i64",
                    seg_offsets="*i64", seg_info="*i32", s0=f32, out=f32)
    kernels = [
        (gdn_fwd.gdn_fwd_kernel_kkt_inverse, dict(g=f32, b_cum=f32, chunk_bound=f32), {}),
        (gdn_fwd.gdn_fwd_kernel_wu, dict(b_cum=f32), {}),
        *((gdn_fwd.gdn_fwd_kernel_state, dict(b_cum=f32, h0=f32, ht=f32),
           dict(USE_INITIAL_STATE=True, STORE_FINAL_STATE=True, TMA=tma)) for tma in (False, True)),
        (gdn_fwd.gdn_fwd_kernel_output, dict(b_cum=f32), {}),
        (gdn_bwd.gdn_bwd_kernel_intra_dv, dict(b_cum=f32, dd_intra=f32), dict(BV=tile(V, 64))),
        (gdn_bwd.gdn_bwd_kernel_state, dict(b_cum=f32, dd_intra=f32, dht=f32, dh0=f32),
         dict(USE_FINAL_STATE_GRADIENT=True, STORE_INITIAL_STATE_GRADIENT=True)),
        (gdn_bwd.gdn_bwd_kernel_grad_output, dict(b_cum=f32, dk_part=f32, db_part=f32), {}),
        (gdn_bwd.gdn_bwd_kernel_grad_wy, dict(b_cum=f32, dk_part=f32, db_part=f32, dg=f32, dbeta=f32), {}),
        (gdn_segments.gdn_fwd_kernel_carry, dict(segments, dd_intra=f32), dict(L=32, LOG_BOUND=TRUNCATION_LOG_BOUND)),
        (gdn_segments.gdn_bwd_kernel_carry, dict(segments, dd_intra=f32), dict(L=32, LOG_BOUND=TRUNCATION_LOG_BOUND)),
        *((gdn_segments.gdn_kernel_resolve, segments,
           dict(BK=K, BV=32, BKK=32, MAXS=32, REVERSE=reverse, USE_S0=True)) for reverse in (False, True)),
    ]
    for kernel, pointers, extra in kernels:
        for kwargs, warps, stages in configs(kernel):
            tma = " TMA" * extra.get("TMA", False)
            tma += f" REVERSE={extra['REVERSE']}" if "REVERSE" in extra else ""
            name = f"gdn {kernel.fn.__name__.removeprefix('gdn_')}{tma} {kwargs} w={warps} s={stages}"
            yield name, resources(kernel, dtype, dict(INDEX, **pointers), dict(base, **extra, **kwargs), warps, stages)


def dla_rows(dtype, K, V):
    f32 = "*fp32"
    low = dtype != "fp32" and K >= dla_fwd.LOW_OPERANDS_MIN_K
    dots = dict(OP=(tl.bfloat16 if low else tl.float32), PRECISION="ieee" if dtype == "fp32" else "tf32", WIDEN=False)
    serial = dict(H=H, K=K, V=V, BT=BT, BK=tile(K, dla_fwd.STATE_TILE), BV=tile(V, dla_fwd.STATE_TILE), USE_G=True,
                  **dots)
    chunk = dict(serial, BK=tile(K, 64), BV=tile(V, dla_fwd.VALUE_TILE))
    states = dict(gc=f32, z=f32, h0=f32, z0=f32, ht=f32, zt=f32, rden=f32, dd=f32, dz=f32, dht=f32, dzt=f32, dh0=f32,
                  dz0=f32, o32=f32, dg=f32)
    for normalize in (False, True):
        kernels = [
            (dla_fwd.dla_fwd_kernel_h, serial, dict(USE_H0=True, STORE_HT=True)),
            (dla_fwd.dla_fwd_kernel_o, chunk, dict(STORE_O32=normalize, SPLIT_SCORES=dtype != "fp32", EPS=1e-6)),
            (dla_bwd.dla_bwd_kernel_dh, serial, dict(USE_DHT=True, STORE_DH0=True)),
            (dla_bwd.dla_bwd_kernel_dv, chunk, {}),
            (dla_bwd.dla_bwd_kernel_dqkg, dict(chunk, BK=tile(K, dla_fwd.KEY_TILE), BV=tile(V, 64)), {}),
        ]
        for kernel, base, extra in kernels:
            for kwargs, warps, stages in configs(kernel):
                name = f"dla{' normalized' * normalize} {kernel.fn.__name__.removeprefix('dla_')} w={warps} s={stages}"
                yield name, resources(kernel, dtype, dict(INDEX, **states),
                                      dict(base, NORMALIZE=normalize, **extra, **kwargs), warps, stages)
    yield "dla fwd_kernel_cumsum", resources(dla_fwd.dla_fwd_kernel_cumsum, "fp32", dict(INDEX, gc=f32),
                                             dict(H=H, BT=BT, BH=H), 4, 2)
    yield "dla bwd_kernel_normalizer", resources(dla_bwd.dla_bwd_kernel_normalizer, dtype,
                                                 dict(o32=f32, rden=f32, dd=f32),
                                                 dict(H=H, V=V, BT=BT, BV=tile(V, 128)), 4, 2)


def main():
    dtype = sys.argv[1] if len(sys.argv) > 1 else "bf16"
    K, V = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (128, 128)
    print(f"sm_90, {dtype} inputs, H={H} K={K} V={V} (Triton {triton.__version__})")
    failed = 0
    for name, line in (*gdn_rows(dtype, K, V), *dla_rows(dtype, K, V)):
        print(f"  {name:60s} {line}", flush=True)
        failed += line.startswith("FAIL")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
