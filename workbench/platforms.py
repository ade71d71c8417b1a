"""The old home of `platforms` (now a package below the workbench, profiling and the case studies).
Re-exported for the frozen lab book in experiments/ only: the library imports `platforms`."""
from platforms.ceilings import ceilings, mem_bandwidth_gbs, peak_tflops
from platforms.device import Platform, describe_device

__all__ = ["Platform", "ceilings", "describe_device", "mem_bandwidth_gbs", "peak_tflops"]
