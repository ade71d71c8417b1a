"""Context memory: a SQLite (WAL) store of every search node of every run, reused across sessions."""

from workbench.memory.records import GENERATION_FAILED, PENDING, Node, RunInfo, content_hash
from workbench.memory.store import Memory, default_memory_path

__all__ = ["GENERATION_FAILED", "PENDING", "Memory", "Node", "RunInfo", "content_hash", "default_memory_path"]
