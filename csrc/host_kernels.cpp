// The built-in kernels of the host device: shaders/ compiled as C++ through
// the CPU prelude. Each kernel is exported as rlx_k_<name> and looked up by
// the host shim with dlsym on its own library handle.
#include "prelude/cpu.h"
#include "all.h"
