"""WuKong Optimized FM (KernelEvolve section 5.3.1): X @ (X^T @ Y) with the D x K intermediate on chip."""
