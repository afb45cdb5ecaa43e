#!/usr/bin/env bash
# H200, session 22, fourth call: 4096 x 4096 through gemv1's f32 form (the
# lowering's 8 rows a group, 512 groups: with 128 registers two groups an
# SM, about two waves): 16 and 32 rows a group (MIN_GROUPS), and gemv1_q
# bounded to three groups an SM (80 registers, through KERNEL_DEFINES) at
# 8 and 16 rows; the decode step with and without the bound. Carry
# .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
B="RLX_QGEMV1_BOUNDS=__launch_bounds__(256,3)"
gemv_kernel_bench f32rows8 SMALL=0 ONLY_ROWS=4096
gemv_kernel_bench f32rows16 SMALL=0 ONLY_ROWS=4096 MIN_GROUPS=256
gemv_kernel_bench f32rows32 SMALL=0 ONLY_ROWS=4096 MIN_GROUPS=128 F32_FORM=1
gemv_kernel_bench bound3rows8 SMALL=1 KERNEL_DEFINES="$B"
gemv_kernel_bench bound3rows16 SMALL=0 ONLY_ROWS=4096 MIN_GROUPS=256 KERNEL_DEFINES="$B"
for variant in default bound3; do
  defs=""; [ $variant = bound3 ] && defs="$B"
  KERNEL_DEFINES="$defs" KV_DTYPES=f32 timeout 150 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed-$variant.json" \
    >"$OUT/llm-speed-$variant.log" 2>&1
  note "llm decode speed ($variant) rc=$?"; grep '^{' "$OUT/llm-speed-$variant.log" | sort -u | cut -c1-300 | tee -a "$S"
done
rm -f "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/*.log
echo "=== summary"; cat "$S"
