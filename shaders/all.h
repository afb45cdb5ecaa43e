// Every built-in kernel, in one translation unit per target. Each target's
// shim includes its prelude first, then this file.
#include "binary.h"
