"""The trusted side's typed messages (`trusted_messages.py`) and the one bounded JSON decode they share with
the candidate's schema (`messages.json_object`)."""
from __future__ import annotations

import json

import pytest

from workbench.harness import messages, trusted_messages
from workbench.harness.trusted_messages import EvalRequest, WireError

DEEP = b"[" * 100_000 + b"]" * 100_000  # the parser's recursion, not a crash


@pytest.mark.parametrize("line", [DEEP, b"{", b"[1, 2]", b"3", b'"x"'], ids=["deep", "cut", "list", "int", "str"])
def test_both_schemas_refuse_a_line_that_is_not_one_json_object(line: bytes) -> None:
    with pytest.raises(messages.NotAnObject):
        messages.json_object(line, messages.MAX_LINE)
    with pytest.raises(messages.SchemaError):
        messages.parse_candidate(line, "abc")
    with pytest.raises(WireError):
        EvalRequest.from_wire(line)


def test_both_schemas_bound_a_line_before_parsing_it() -> None:
    with pytest.raises(messages.SchemaError, match="limit"):
        messages.parse_candidate(b" " * (messages.MAX_LINE + 1), "abc")
    with pytest.raises(WireError, match="limit"):
        EvalRequest.from_wire(" " * (trusted_messages.MAX_LINE + 1))
    with pytest.raises(WireError, match="expected a JSON object"):
        EvalRequest.from_wire([1])  # already decoded, still not an object
    assert EvalRequest.from_wire(json.dumps({"trials": 2})).trials == 2
    assert messages.json_object(b'{"a": 1}', 10) == {"a": 1}
