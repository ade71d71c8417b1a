"""The old home of `platforms.provenance`. Re-exported for the callers not moved yet: workbench/suites
(cli.py, runner.py) and the frozen lab book in experiments/, which names this path."""
from platforms.provenance import collect, git_commit

__all__ = ["collect", "git_commit"]
