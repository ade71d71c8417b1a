"""Convolutional-transformer conv1d (KernelEvolve section 5.1-5.2): implicit GEMM with packed weights."""
