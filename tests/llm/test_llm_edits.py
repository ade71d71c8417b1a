"""SEARCH/REPLACE edits against a parent (workbench.llm.edits) and the reply pipeline that uses them
(workbench.llm.candidate.candidate_from_reply)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from workbench.llm.candidate import candidate_from_reply
from workbench.llm.edits import Edit, apply_edits, apply_region, editable_regions, parse_edits
from workbench.llm.precheck import precheck
from workbench.llm.settings import LLMSettings, LLMSettingsError

ROOT = Path(__file__).resolve().parents[2]
REPLIES = Path(__file__).parent / "fixtures" / "replies"
SPEC = (ROOT / "examples/vector_add/spec.py").read_text()
PARENT = (ROOT / "examples/vector_add/candidate.py").read_text()


def _block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def test_parse_several_blocks_and_count_an_unclosed_one() -> None:
    text = "Two changes:\n" + _block("a = 1\n", "a = 2\n") + "and\n" + _block("b\n", "") + "<<<<<<< SEARCH\nc\n"
    edits, unclosed = parse_edits(text)
    assert edits == [Edit("a = 1\n", "a = 2\n"), Edit("b\n", "")] and unclosed == 1


def test_exact_edit_applies_once() -> None:
    out = apply_edits(PARENT, [Edit("BLOCK_SIZE = 64\n", "BLOCK_SIZE = 1024\n")])
    assert out.source == PARENT.replace("BLOCK_SIZE = 64\n", "BLOCK_SIZE = 1024\n")
    assert (out.applied, out.total, out.notes) == (1, 1, ())


def test_trailing_whitespace_and_shifted_indentation_still_name_one_place() -> None:
    search = "mask = offs < n   \na = tl.load(a_ptr + offs, mask=mask)\n"  # dedented and with trailing blanks
    replace = "mask = offs < n\na = tl.load(a_ptr + offs, mask=mask, other=0.0)\n"
    out = apply_edits(PARENT, [Edit(search, replace)])
    assert "    a = tl.load(a_ptr + offs, mask=mask, other=0.0)\n" in out.source
    assert out.notes == ("edit 1: matched with the indentation shifted",)


def test_an_edit_that_does_not_apply_is_a_diagnosis_and_nothing_is_applied() -> None:
    ok = Edit("BLOCK_SIZE = 64\n", "BLOCK_SIZE = 128\n")
    missing = Edit("    return a * b\n", "    return a\n")
    out = apply_edits(PARENT, [ok, missing])
    assert out.source is None and out.applied == 1
    assert out.diagnosis == "edit 2 of 2: SEARCH text not found in the parent (SEARCH starts `return a * b`)"
    twice = apply_edits(PARENT, [Edit("mask=mask", "mask=mask, other=0")])
    assert twice.source is None and "occurs 3 times" in twice.diagnosis
    assert apply_edits(PARENT, []).diagnosis == "no complete SEARCH/REPLACE block in the reply"
    noop = apply_edits(PARENT, [Edit("BLOCK_SIZE = 64\n", "BLOCK_SIZE = 64\n")])
    assert noop.source is None and "unchanged" in noop.diagnosis


def _cfg(**kw) -> LLMSettings:
    return LLMSettings(**kw)


def test_candidate_from_reply_applies_edits_then_checks() -> None:
    reply = "Bigger blocks:\n" + _block("BLOCK_SIZE = 64\n", "BLOCK_SIZE = 512\n")
    fin = candidate_from_reply(reply, spec_source=SPEC, parent_source=PARENT, settings=_cfg(), edit_prompt=True)
    assert fin.form == "edits" and not fin.rejected and fin.error_class is None
    assert "BLOCK_SIZE = 512" in fin.source and fin.notes[0] == "applied 1 edit(s) to the parent"


def test_candidate_from_reply_whole_module_instead_of_edits_is_accepted() -> None:
    module = PARENT.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 256")
    fin = candidate_from_reply(f"```python\n{module}```\n", spec_source=SPEC, parent_source=PARENT, settings=_cfg(),
                       edit_prompt=True)  # fmt: skip
    assert fin.form == "module" and fin.source.strip() == module.strip() and not fin.rejected


def test_candidate_from_reply_unapplied_edit_and_identical_module() -> None:
    bad = candidate_from_reply(_block("nothing like this\n", "x\n"), spec_source=SPEC, parent_source=PARENT,
                               settings=_cfg(), edit_prompt=True)  # fmt: skip
    assert bad.source is None and bad.error_class == "edit_not_applied"
    same = candidate_from_reply(f"```python\n# reformatted\n{PARENT}```", spec_source=SPEC, parent_source=PARENT,
                        settings=_cfg(), edit_prompt=True)  # fmt: skip
    assert same.rejected and "precheck:identical_to_parent" in same.diagnosis


def test_real_smollm2_reply_echoing_the_edit_template_is_no_code() -> None:
    reply = (REPLIES / "smollm2_vector_add_edit_template_echo.txt").read_text()
    fin = candidate_from_reply(reply, spec_source=SPEC, parent_source=PARENT, settings=_cfg(), edit_prompt=True)
    assert fin.source is None and fin.error_class in ("edit_not_applied", "parse_error")


def test_settings_reject_bad_options_with_one_line() -> None:
    with pytest.raises(LLMSettingsError, match="best_of"):
        LLMSettings(best_of=0)
    with pytest.raises(LLMSettingsError, match="temperatures"):
        LLMSettings(temperatures=[3.0])
    with pytest.raises(LLMSettingsError, match="unknown llm_step option"):
        LLMSettings.from_dict({"beam": 3})
    assert [LLMSettings(temperatures=[0.2, 0.8]).temperature(i) for i in range(3)] == [0.2, 0.8, 0.2]


def test_regions_of_a_parent_and_their_replacement() -> None:
    regions = editable_regions(PARENT)
    assert [(r.kind, r.name) for r in regions] == [
        ("tunables", "the tunable constants"),
        ("kernel", "the kernel add_scaled_kernel"),
        ("forward", "ModelNew.forward"),
    ]
    tun = apply_region(PARENT, regions[0], 'TUNABLES = {"BLOCK_SIZE": [64, 4096]}\nBLOCK_SIZE = 4096\nNUM_WARPS = 4')
    assert "BLOCK_SIZE = 4096\nNUM_WARPS = 4\n" in tun.source and "BLOCK_SIZE = 64\n" not in tun.source
    not_consts = apply_region(PARENT, regions[0], "def f():\n    pass")
    assert not_consts.source is None and "only NAME = value" in not_consts.diagnosis


def test_a_kernel_region_keeps_its_decorator_and_a_method_its_indentation() -> None:
    regions = editable_regions(PARENT)
    body = regions[1].text.replace("@triton.jit\n", "").replace("mask=mask)\n    b", "mask=mask, other=0.0)\n    b")
    out = apply_region(PARENT, regions[1], body)
    assert "@triton.jit\ndef add_scaled_kernel" in out.source and "other=0.0" in out.source
    wrong = apply_region(PARENT, regions[1], "def other_kernel(x):\n    pass")
    assert wrong.source is None and "expected one function add_scaled_kernel" in wrong.diagnosis
    split = "a = a.contiguous()\n        b = b.contiguous()"
    fwd = regions[2].text.replace("a, b = a.contiguous(), b.contiguous()", split)
    out = apply_region(PARENT, regions[2], textwrap.dedent(fwd))
    assert "\n        b = b.contiguous()\n" in out.source and precheck(out.source, spec_source=SPEC) == []


def test_candidate_from_reply_region_path_on_a_fenced_part() -> None:
    region = editable_regions(PARENT)[0]
    reply = "```python\nTUNABLES = {\"BLOCK_SIZE\": [64, 1024]}\nBLOCK_SIZE = 1024\nNUM_WARPS = 4\n```\nBigger blocks."
    fin = candidate_from_reply(reply, spec_source=SPEC, parent_source=PARENT, settings=_cfg(), edit_prompt=True,
                               region=region)  # fmt: skip
    assert fin.form == "region" and not fin.rejected and "BLOCK_SIZE = 1024" in fin.source
    same = candidate_from_reply(f"```python\n{region.text}\n```", spec_source=SPEC, parent_source=PARENT,
                                settings=_cfg(), edit_prompt=True, region=region)  # fmt: skip
    assert same.source is None and "the same as the parent's" in same.diagnosis

