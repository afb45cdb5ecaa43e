// Every built-in kernel, in one translation unit per target. Each target's
// shim includes its prelude first, then this file.
#include "binary.h"
#include "unary.h"
#include "softmax.h"
#include "layernorm.h"
#include "gather.h"
#include "copy.h"
#include "rope.h"
#include "attention.h"
