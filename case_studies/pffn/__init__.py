"""InterFormer PFFN (KernelEvolve section 5.3.2): per-token FFN with GELU and two RMSNorms, fused."""
