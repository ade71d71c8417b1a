"""`workbench/cli.py`'s table is the whole list of verbs: each entry adds its verb and nothing else."""
from __future__ import annotations

import pytest

from workbench import cli


def test_the_parser_has_exactly_the_verbs_of_the_table_in_its_order():
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    assert list(sub.choices) == list(cli.COMMANDS) == ["eval", "optimize", "lower", "suite", "kb", "profile"]


def test_an_entry_that_adds_another_verb_is_refused(monkeypatch):
    def register_two(sub):
        sub.add_parser("kb")
        sub.add_parser("kb2")

    monkeypatch.setitem(cli.COMMANDS, "kb", register_two)
    with pytest.raises(RuntimeError, match=r"added \['kb', 'kb2'\], the table says 'kb'"):
        cli.build_parser()
