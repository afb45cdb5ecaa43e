// Every built-in kernel, one header per op family (the names of rlx/ir/ops/,
// rlx/reference/ and tests/ops/), in one translation unit per target. Each target's
// shim (or rlx/runtime/shader_source.py) puts its prelude first.
#include "elementwise.h"
#include "reduce.h"
#include "softmax.h"
#include "norm.h"
#include "glu.h"
#include "linear.h"
#include "movement.h"
#include "rope.h"
#include "attention.h"
// quant.h uses movement.h's GatherParams.
#include "quant.h"
#include "state.h"
#include "fft.h"
#include "fp8.h"
#include "topk.h"
#include "penalty.h"
#include "sort.h"
#include "splat.h"
