#!/usr/bin/env bash
# H200, session 13, first call: (1) the shim ABI's buffer_wrap /
# buffer_rebind (host only; the cuda shim must refuse them, and every cuda
# run still copies): the conformance suite and the bound-IO tests on cuda;
# (2) attention_split_merge, split-K attention as one dispatch (the last
# group of a row merges it): the attention suite on cuda at group sizes 0
# and 32, memcheck / racecheck / synccheck on the one-dispatch cases, the
# decode step with and without it (one run), the PDL-off trace.
# Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "cts + bound io (cuda)" cts.log tests/cts tests/runtime/test_bound_io.py
suite "attention (cuda, gs 0)" att.log tests/ops/test_attention.py --rlx-device cuda
suite "attention split forms (cuda, gs 32)" att32.log tests/ops/test_attention.py --rlx-device cuda \
  --rlx-group-size 32 -k "split or form"
suite "attention split forms (cuda, gs 256)" att256.log tests/ops/test_attention.py --rlx-device cuda \
  --rlx-group-size 256 -k "split_decode_gqa or masks_window"
sanitize memcheck "split_merge memcheck" memcheck.log tests/ops/test_attention.py --rlx-device cuda \
  -k "one_dispatch and f32"
sanitize racecheck "split_merge racecheck" racecheck.log tests/ops/test_attention.py --rlx-device cuda \
  -k "one_dispatch and f32 and masks"
sanitize synccheck "split_merge synccheck" synccheck.log tests/ops/test_attention.py --rlx-device cuda \
  -k "one_dispatch and f32 and masks"
KV_DTYPES=f32 WITHOUT=" ;attention_split_merge" timeout 150 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf \
  "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "decode speed: all, without attention_split_merge rc=$?"
grep '^{' "$OUT/llm-speed.log" | cut -c1-200 | tee -a "$S"
pdl_off_trace 1 12
echo "=== summary ==="; cat "$S"
exit 0
