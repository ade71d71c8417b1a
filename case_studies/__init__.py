"""Case studies from the KernelEvolve paper (section 5), each one folder with one stem everywhere:
`reference.py` (plain PyTorch), `kernel.py` (Triton), `spec.py` (KernelBench format), `dispatch.py`
(shape-aware choice between the two from recorded results), and its benchmark declared as data.
`case_studies.common` holds what they share (timing, the declared-benchmark runner, CSV with provenance,
the dispatcher base)."""
