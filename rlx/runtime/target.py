"""What the lowering needs to know about a device: its capabilities and how
it likes work split into groups. Nothing below the runtime knows which device
it runs on except through this object (DESIGN section 1)."""

from __future__ import annotations

from dataclasses import dataclass

_GEMM_MIXES = {
    "host": frozenset({("f16", "f16", "f32")}),
    "cuda": frozenset({("f16", "f16", "f32")}),
}


# Rows per group for row kernels whose rows fit one SIMD group (row_grid).
ROWS_PER_GROUP = 4


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Target:
    backend: str                 # "host", "cuda", "metal"
    compute_units: int
    max_threads_per_group: int
    simd_width: int
    max_buffer_length: int
    # Byte alignment of a kernel's params struct inside the params region.
    # Metal wants constant-buffer offsets aligned to 256 on some GPUs.
    params_alignment: int = 16
    # Fused ops this target can lower (rlx/opt/fusion.py emits only these);
    # "linear_siblings": merge sibling projections (rlx/opt/siblings.py);
    # "sibling_ropes": then their query/key norms (rlx/opt/sibling_ropes.py);
    # "attention_split_merge": split-K attention as one dispatch
    # (rlx/lowering/attention.py; not on Metal); "norm_gemv": a one-row
    # rmsnorm_add chain formed by the decode GEMV after it (rlx/lowering/
    # quant.py; GPUs only, whatever the set says); "rope_cache": a set_rows
    # pair folded into the rmsnorm_rope that formed its keys (rlx/lowering/
    # rope_cache.py).
    capabilities: frozenset[str] = frozenset({"fused_elementwise", "linear", "add_layernorm", "add_rmsnorm", "glu",
                                              "glu_linear", "attention", "rmsnorm_add_rmsnorm", "rmsnorm_add",
                                              "rmsnorm_rope", "linear_siblings", "sibling_ropes",
                                              "attention_split_merge", "windowed_rfft", "windowed_rfft_power",
                                              "norm_gemv",
                                              "rope_cache"})
    # The shim's gemm adds a per-column bias itself (rlx_device_info.gemm_bias:
    # host after the BLAS, cuda through cuBLASLt, not Metal's MPS).
    gemm_bias: bool = False
    # The shim's gemm takes FP8 operands (rlx_device_info.gemm_fp8: cuda on
    # compute capability >= 8.9 with cuBLASLt, unless RLX_CUDA_FP8_GEMM=0).
    gemm_fp8: bool = False
    # The output dtypes ("f32", "f16", "bf16") the FP8 gemm writes with outer-
    # vector scales, one per row of x and one per output channel
    # (rlx_device_info.gemm_fp8_outer: cuda where cuBLASLt has them).
    gemm_fp8_outer: frozenset[str] = frozenset()

    @property
    def gemm_mixes(self) -> frozenset[tuple[str, str, str]]:
        """The optional (A, B, C) dtype combinations this backend's gemm
        takes besides uniform f32 and f16: the kExtraGemmTypes tables of
        csrc/host/ and csrc/cuda/ (the Metal shim has none)."""
        return _GEMM_MIXES.get(self.backend, frozenset())


    @property
    def one_thread_groups(self) -> bool:
        """The CPU runs every group with one thread (DESIGN section 3)."""
        return self.backend == "host"

    def elementwise_grid(self, n: int, scalar: bool = False, cost: int = 1
                         ) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """Groups and threads for a range loop over n elements.

        CPU: a few contiguous chunks per worker, and a single group for small
        n so the dispatch runs inline without waking the pool. `scalar`: the
        loop does not vectorize on the CPU (copy, gather and broadcasting
        binary ops compute each element's index with integer divisions;
        GCC 12 keeps binary's op switch inside its loop), an order of
        magnitude slower an element than a vectorized one, so the pool pays
        off from far fewer elements (benchmarks/README.md, "CPU small
        dispatches"). `cost`: an element weighs about that many scalar
        elements on the CPU (a splat projection's tile tests), so the pool
        splits the loop at that many fewer. GPU: groups of up to 256
        threads, one an element, the grid-stride loop covers the rest;
        `scalar` and `cost` change nothing there (the groups past n would
        only start and exit)."""
        n = max(int(n), 1)
        if self.one_thread_groups:
            groups = min(_ceil_div(n * max(int(cost), 1), 2048 if scalar else 16384), 4 * self.compute_units)
            return (max(groups, 1), 1, 1), (1, 1, 1)
        # Tiny ops get only the SIMD groups they fill: a smaller group starts
        # and retires sooner, which is what a chain of them waits on.
        width = max(self.simd_width, 1)
        threads = min(256, self.max_threads_per_group, max(width, _ceil_div(n, width) * width))
        groups = min(_ceil_div(n, threads), 65535)
        return (groups, 1, 1), (threads, 1, 1)

    def row_grid(self, rows: int, cols: int, stacked: bool = False
                 ) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """One group per row. GPU groups are a multiple of the SIMD width:
        a thread per column while rows are few (the row's latency is the
        run's), four columns per thread and at most 128 threads once there
        are enough rows to fill every core several times (faster on the
        H200 for the softmax, layernorm and bias kernels of BERT 32 x 128:
        benchmarks/gpu/row_grid_variants.py, benchmarks/README.md).

        `stacked` (kernels that take their row from group_id.x * group_size.y
        + local_id.y): when a row needs only one SIMD group, ROWS_PER_GROUP
        rows share a group, one per SIMD group. A GPU core holds a bounded
        number of groups (H200: benchmarks/README.md), so one-SIMD-group groups leave half
        its thread slots empty; the masked softmax of BERT 32 x 128 (49152
        rows of 128) is bound by exactly that."""
        rows = max(int(rows), 1)
        if self.one_thread_groups:
            return (rows, 1, 1), (1, 1, 1)
        width = max(self.simd_width, 1)
        many_rows = rows >= 4 * self.compute_units
        per_thread, cap = (4, 128) if many_rows else (1, 1024)
        wanted = _ceil_div(max(int(cols), 1), per_thread)
        threads = min(self.max_threads_per_group, cap, max(width, _ceil_div(wanted, width) * width))
        if stacked and many_rows and threads == width and width > 1:
            per_group = min(ROWS_PER_GROUP, self.max_threads_per_group // width)
            return (_ceil_div(rows, per_group), 1, 1), (threads, per_group, 1)
        return (rows, 1, 1), (threads, 1, 1)


def host_target(compute_units: int, max_buffer_length: int) -> Target:
    return Target("host", compute_units, 1024, 1, max_buffer_length)
