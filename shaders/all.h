// Every built-in kernel, in one translation unit per target. Each target's
// shim (or rlx/runtime/shader_source.py) puts its prelude first.
#include "binary.h"
#include "unary.h"
#include "reduce.h"
#include "softmax.h"
#include "layernorm.h"
#include "rmsnorm.h"
#include "glu.h"
#include "linear.h"
#include "gather.h"
#include "copy.h"
#include "rope.h"
#include "attention.h"
