"""The old home of `platforms.provenance`. Re-exported for the frozen lab book in experiments/ only, which
names this path: the library imports `platforms.provenance`."""
from platforms.provenance import collect, git_commit

__all__ = ["collect", "git_commit"]
