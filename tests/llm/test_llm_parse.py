"""The response parser on a table of malformed replies: it finds the kernel or says why not, never raises."""

from __future__ import annotations

import random

import pytest

from workbench.llm.parse import CodeExtraction, extract_code

MODEL = """import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.maximum(x, 0), mask=offs < n)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y"""

KERNEL_ONLY, MODULE_ONLY = MODEL.split("\n\n\nclass ModelNew")
MODULE_ONLY = "import torch\nimport triton\n\nclass ModelNew" + MODULE_ONLY
TRUNCATED = MODEL[: MODEL.index("relu_kernel[(") + 20]

# name, reply, expected code (None: no code; "MODEL": the full module), n_blocks, truncated, syntax_ok,
# a fragment the diagnosis must contain
CASES = [
    ("clean", f"Here is the kernel:\n```python\n{MODEL}\n```\n", MODEL, 1, False, True, "ok: one code block"),
    (
        "chatter around",
        f"Sure!! I love kernels.\n\n```python\n{MODEL}\n```\n\nThis is 3x faster. Hope it helps",
        MODEL,
        1,
        False,
        True,
        "ok",
    ),
    (
        "no fences",
        f"Sure, here it is:\n{MODEL}\n\nLet me know if it works!",
        MODEL,
        0,
        False,
        True,
        "no code fences",
    ),
    (
        "no fences, jit only",
        f"Try this:\n{KERNEL_ONLY}\nThat is all.",
        KERNEL_ONLY,
        0,
        False,
        True,
        "does not define class ModelNew",
    ),
    (
        "two blocks, second defines ModelNew",
        f"First the imports:\n```python\nimport os\nx = 1\n```\nThen:\n```python\n{MODEL}\n```",
        MODEL,
        2,
        False,
        True,
        "took block 2",
    ),
    (
        "two versions, last is the fix",
        f"```python\n{MODEL.replace('return y', 'return y +')}\n```\nOops, fixed:\n```python\n{MODEL}\n```",
        MODEL,
        2,
        False,
        True,
        "2 blocks define ModelNew",
    ),
    (
        "kernel and module split",
        f"Kernel:\n```python\n{KERNEL_ONLY}\n```\nModule:\n```python\n{MODULE_ONLY}\n```",
        None,
        2,
        False,
        True,
        "prepended definitions from block(s) 1",
    ),
    (
        "no ModelNew: longest python block",
        "```python\nprint(1)\n```\n```python\nimport torch\nx = torch.ones(3)\n"
        "y = x * 2\n```\n```bash\npip install a-very-long-package-name-here another-one\n```",
        "import torch\nx = torch.ones(3)\ny = x * 2",
        3,
        False,
        True,
        "longest python block (2 of 3)",
    ),
    ("truncated fence", f"```python\n{TRUNCATED}", TRUNCATED, 1, True, False, "never closed"),
    ("truncated but parses", f"```python\n{MODEL}", MODEL, 1, True, True, "truncated"),
    (
        "syntax error in block",
        "```python\nclass ModelNew(torch.nn.Module:\n    pass\n```",
        "class ModelNew(torch.nn.Module:\n    pass",
        1,
        False,
        False,
        "syntax error at line 1",
    ),
    (
        "fence opened at end of prose line",
        f"The code is ```python\n{MODEL}\n```",
        MODEL,
        1,
        False,
        True,
        "ok",
    ),
    ("closing fence glued to code", f"```python\n{MODEL}```\nDone", MODEL, 1, False, True, "ok"),
    ("tilde fences and py tag", f"~~~py\n{MODEL}\n~~~", MODEL, 1, False, True, "ok"),
    (
        "indented block in a list",
        "1. Use this:\n    ```python\n"
        + "\n".join("    " + line for line in MODEL.split("\n"))
        + "\n    ```",
        MODEL,
        1,
        False,
        True,
        "ok",
    ),
    (
        "bash block plus bare code",
        f"```bash\npip install triton\n```\n{MODEL}\n",
        MODEL,
        1,
        False,
        True,
        "non-python block",
    ),
    (
        "think tags",
        f"<think>maybe ```python\nclass ModelNew: pass\n``` no</think>\n```python\n{MODEL}\n```",
        MODEL,
        1,
        False,
        True,
        "ok",
    ),
    (
        "unclosed think",
        "<think>I should write class ModelNew(nn.Module) with @triton.jit and",
        None,
        0,
        False,
        False,
        "no code block",
    ),
    ("prose only", "I am a small model and I like cats.", None, 0, False, False, "no code block"),
    ("empty", "", None, 0, False, False, "empty response"),
    ("whitespace", "  \n\t ", None, 0, False, False, "empty response"),
    (
        "inline code is not a block",
        "Use ```x = relu(y)``` then call ModelNew.",
        None,
        0,
        False,
        False,
        "no code block",
    ),
    (
        "nonsense from a tiny model",
        "```\n```\n```python\n\n```\nclass class class",
        None,
        0,
        False,
        False,
        "no code block",
    ),
]


@pytest.mark.parametrize(
    "name, reply, code, n_blocks, truncated, syntax_ok, fragment", CASES, ids=[c[0] for c in CASES]
)
def test_parser_table(name, reply, code, n_blocks, truncated, syntax_ok, fragment):
    got = extract_code(reply)
    assert isinstance(got, CodeExtraction)
    assert fragment in got.diagnosis, got.diagnosis
    assert got.n_blocks == n_blocks, got
    assert got.truncated is truncated, got
    if code is None and fragment.startswith(("no code", "empty")):
        assert got.code is None
    elif code is None:  # merged: both halves, kernel first
        assert got.code is not None
        assert got.code.index("def relu_kernel") < got.code.index("class ModelNew")
    else:
        assert got.code == code
    if got.code is not None:
        assert got.syntax_ok is syntax_ok, got.diagnosis
        assert got.defines_model_new == ("class ModelNew" in got.code)


def test_finish_reason_length_marks_truncated_even_with_closed_fences():
    got = extract_code(f"```python\n{MODEL}\n```", finish_reason="length")
    assert got.truncated and got.syntax_ok and "max_tokens" in got.diagnosis


def test_never_raises_on_hostile_input():
    rng = random.Random(1234)
    alphabet = [
        "```",
        "~~~",
        "\n",
        "python",
        "class ModelNew",
        "@triton.jit",
        "def f(:",
        "\x00",
        "<think>",
        "</think>",
        "    ",
        "(",
        ")",
        ":",
        "`",
        "\r\n",
        "é",
        "return",
        "import torch",
    ]
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        got = extract_code(text)
        assert isinstance(got, CodeExtraction) and isinstance(got.diagnosis, str) and got.diagnosis
    for weird in (None, 123, b"```python\nx\n```", "(" * 5000 + "class ModelNew: pass"):
        got = extract_code(weird)  # type: ignore[arg-type]
        assert isinstance(got, CodeExtraction)
