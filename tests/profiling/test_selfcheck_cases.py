"""The self-check takes the case-study kernels it profiles from its caller (`--cases-from module:function`)
instead of importing the case studies itself."""
from __future__ import annotations

import pytest

from profiling import selfcheck


def test_cases_from_builds_cases_from_a_function_named_on_the_command_line():
    (case,) = selfcheck.cases_from("case_studies.mbdt.profile:selfcheck_case", "cpu")
    assert isinstance(case, selfcheck.Case) and case.name == "mbdt" and (case.atol, case.rtol) == (0, 0)
    assert case.bytes == 12 * 65536 * 256 and "PROBES" in case.kernel.arg_names


@pytest.mark.parametrize("spec", ["case_studies.mbdt.profile", ":selfcheck_case"])
def test_cases_from_rejects_a_spec_without_module_and_function(spec):
    with pytest.raises(ValueError, match="module:function"):
        selfcheck.cases_from(spec, "cpu")
