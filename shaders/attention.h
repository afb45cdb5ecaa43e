// Attention kernels (issue 3).
