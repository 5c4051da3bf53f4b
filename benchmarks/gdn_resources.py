"""Registers, spills (stack bytes per thread) and shared memory of the gated delta rule kernels at sm_90,
compiled on this machine without a GPU (zero device time).

Usage: ``python benchmarks/gdn_resources.py [bf16|fp32]``. The local Triton may differ from the device's
(3.6 on the H200 machines), so take the numbers as indicative: a config that spills here likely spills there.
"""
from __future__ import annotations

import inspect
import os
import subprocess
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from relin.kernels.gated_delta_rule import grad, intra_dv, output, state, wy

CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
TARGET = GPUTarget("cuda", 90, 32)
H, K, V, BT, BK = 16, 128, 128, 64, 128


def resources(kernel, dtype, pointers, constexprs, warps, stages) -> str:
    """Compile ``kernel`` for sm_90; other pointers default to ``dtype``; return its resource line."""
    params = list(inspect.signature(kernel.fn.fn).parameters)
    scalars = {"T": "i32", "WIDTH": "i32", "scale": "fp32"}
    signature = {p: "constexpr" if p in constexprs else scalars.get(p) or pointers.get(p, "*" + dtype) for p in params}
    source = ASTSource(fn=kernel.fn, signature=signature,
                       constexprs={(params.index(name),): value for name, value in constexprs.items() if name in params})
    try:
        compiled = triton.compile(source, target=TARGET, options=dict(num_warps=warps, num_stages=stages))
    except Exception as error:  # noqa: BLE001 - e.g. out of shared memory: reported, not fatal
        return f"FAIL {type(error).__name__}: {str(error)[:120]}"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        dump = subprocess.run([CUOBJDUMP, "--dump-resource-usage", cubin.name], capture_output=True, text=True).stdout
    usage = dict(item.split(":") for line in dump.splitlines() if "REG:" in line for item in line.split()
                 if item.startswith(("REG:", "STACK:")))
    return f"regs {usage.get('REG', '?'):>3s}  stack {usage.get('STACK', '?'):>5s} B  smem {compiled.metadata.shared:6d} B"


def main():
    dtype = sys.argv[1] if len(sys.argv) > 1 else "bf16"
    f32, idx = "*fp32", dict(cu_seqlens="*i64", chunk_indices="*i32", chunk_offsets="*i64")
    base = dict(H=H, K=K, V=V, BT=BT, BK=BK, PRECISION="ieee" if dtype == "fp32" else "tf32", WIDEN=False)
    rows = []
    for config in wy._KKT_CONFIGS:
        bk, warps = config.kwargs["BK"], config.num_warps
        rows.append((f"kkt_inverse BK={bk} w={warps}", resources(wy.gdn_fwd_kernel_kkt_inverse, dtype, dict(
            idx, g=f32, b_cum=f32), dict(base, BK=bk), warps, 3)))
    for config in wy._WU_CONFIGS:
        bv, warps, stages = config.kwargs["BV"], config.num_warps, config.num_stages
        rows.append((f"wu BV={bv} w={warps} s={stages}", resources(wy.gdn_fwd_kernel_wu, dtype, dict(
            idx, b_cum=f32), dict(base, BV=bv), warps, stages)))
    for config in state._FWD_CONFIGS:
        bv, warps, stages = config.kwargs["BV"], config.num_warps, config.num_stages
        rows.append((f"fwd state BV={bv} w={warps} s={stages}", resources(state.gdn_fwd_kernel_state, dtype, dict(
            idx, b_cum=f32, h0=f32, ht=f32), dict(base, BV=bv, USE_INITIAL_STATE=False, STORE_FINAL_STATE=False),
            warps, stages)))
    for config in state._BWD_CONFIGS:
        bv, warps, stages = config.kwargs["BV"], config.num_warps, config.num_stages
        rows.append((f"bwd state BV={bv} w={warps} s={stages}", resources(state.gdn_bwd_kernel_state, dtype, dict(
            idx, b_cum=f32, dd_intra=f32, dht=f32, dh0=f32),
            dict(base, BV=bv, USE_FINAL_STATE_GRADIENT=False, STORE_INITIAL_STATE_GRADIENT=False), warps, stages)))
    for config in output._CONFIGS:
        bv, warps = config.kwargs["BV"], config.num_warps
        rows.append((f"output BV={bv} w={warps}", resources(output.gdn_fwd_kernel_output, dtype, dict(
            idx, b_cum=f32), dict(base, BV=bv), warps, config.num_stages)))
    for warps in (4, 8):
        rows.append((f"intra_dv w={warps}", resources(intra_dv.gdn_bwd_kernel_intra_dv, dtype, dict(
            idx, b_cum=f32, dd_intra=f32), dict(base, BV=64),
            warps, 3)))
    for config in grad._CONFIGS:
        bv, warps, stages = config.kwargs["BV"], config.num_warps, config.num_stages
        rows.append((f"grad output BV={bv} w={warps} s={stages}", resources(grad.gdn_bwd_kernel_grad_output, dtype, dict(
            idx, b_cum=f32, dk_part=f32, db_part=f32), dict(base, BV=bv), warps, stages)))
        rows.append((f"grad wy BV={bv} w={warps} s={stages}", resources(grad.gdn_bwd_kernel_grad_wy, dtype, dict(
            idx, b_cum=f32, dk_part=f32, db_part=f32, dg=f32, dbeta=f32), dict(base, BV=bv), warps, stages)))
    print(f"sm_90, {dtype} inputs, H={H} K={K} V={V} (Triton {triton.__version__})")
    for name, line in rows:
        print(f"  {name:30s} {line}")


if __name__ == "__main__":
    main()
