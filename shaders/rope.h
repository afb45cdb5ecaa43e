// RoPE kernels (issue 3).
