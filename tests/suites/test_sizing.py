"""CPU auto-sizing: constants halved until every tensor is under the bound, nothing allocated."""
from pathlib import Path

import pytest

from tests.suites.kb_folder import write_problems
from workbench.spec import SpecError, load_spec
from workbench.suites.sizing import auto_size, measure, shrink

KB = Path(__file__).resolve().parents[3] / "shared" / "kernelbench"

CONV = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c_in, c_out, k, groups):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k, groups=groups)

    def forward(self, x):
        return torch.relu(self.conv(x))


batch_size = 64
in_channels = 64
out_channels = 128
kernel_size = 3
groups = 8
height = width = 512
axis = 1


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups]
'''


def test_elementwise_problem_is_shrunk_under_the_bound(tmp_path):
    root = write_problems(tmp_path, ["1_Add"])
    path = root / "level1" / "1_Add.py"
    over = auto_size(path, 1 << 14)
    assert over and set(over) <= {"batch_size", "dim"}
    assert over["batch_size"] * over["dim"] <= 1 << 14
    assert auto_size(path, 1 << 30) == {}  # the published sizes fit: nothing changes
    assert auto_size(path, 1 << 14) == over  # pure: same answer twice


def test_conv_sizing_keeps_the_spec_valid(tmp_path):
    path = tmp_path / "conv.py"
    path.write_text(CONV)
    spec = load_spec(path, module_name="t_conv")
    before = measure(spec, {})
    assert before.max_elems == 64 * 128 * 510 * 510  # the conv output, measured without allocating 8 GB
    res = shrink(spec, 1 << 15)
    assert res.reached and res.footprint.max_elems <= 1 << 15 and res.footprint.forward_checked
    ov = res.overrides
    assert "axis" not in ov  # a 1 that sizes nothing is never touched
    c_in = ov.get("in_channels", 64)
    assert c_in % 8 == 0 and ov.get("out_channels", 128) % 8 == 0  # groups=8 still divides the channels
    assert ov.get("height", 512) >= 3 and ov.get("width", 512) >= 3  # the 3x3 kernel still fits
    assert res.footprint.input_shapes == [[ov.get("batch_size", 64), c_in, ov.get("height", 512),
                                           ov.get("width", 512)]]


def test_bad_spec_is_one_line(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("import torch\n")
    with pytest.raises(SpecError, match="Model"):
        auto_size(path, 1024)
    with pytest.raises(ValueError):
        auto_size(path, 0)


@pytest.mark.skipif(not KB.is_dir(), reason="KernelBench folder absent")
def test_real_kernelbench_relu_and_matmul():
    relu = KB / "level1" / "19_ReLU.py"  # 4096 x 393216 published: 6 GB of fp32
    over = auto_size(relu, 1 << 16)
    assert over["batch_size"] * over["dim"] <= 1 << 16
    mm = KB / "level1" / "2_Standard_matrix_multiplication_.py"
    over = auto_size(mm, 1 << 16)
    assert max(over["M"] * over["K"], over["K"] * over["N"], over["M"] * over["N"]) <= 1 << 16


def test_shape_tuples_shrink_and_kernel_tuples_keep_their_meaning(tmp_path):
    path = tmp_path / "cumsum.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                    "    def __init__(self, k):\n        super().__init__()\n        self.k = k\n\n"
                    "    def forward(self, x):\n        return torch.cumsum(x, dim=1) * self.k[0]\n\n\n"
                    "batch_size = 32768\ninput_shape = (32768,)\nkernel_size = (3, 5)\n\n\n"
                    "def get_inputs():\n    return [torch.rand(batch_size, *input_shape)]\n\n\n"
                    "def get_init_inputs():\n    return [kernel_size]\n")
    over = auto_size(path, 1 << 12)
    assert "kernel_size" not in over and isinstance(over["input_shape"], tuple)
    assert over["batch_size"] * over["input_shape"][0] <= 1 << 12


DERIVED = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, predictions, targets):
        return torch.nn.functional.cross_entropy(predictions, targets)


batch_size = 32768
num_classes = 4096
input_shape = (num_classes,)
dim = 1


def get_inputs():
    return [torch.rand(batch_size, *input_shape), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
'''


def test_constants_computed_from_others_follow_their_sources(tmp_path):
    # KernelBench's 95_CrossEntropyLoss: halving input_shape alone would leave targets past the class axis
    spec_file = tmp_path / "ce.py"
    spec_file.write_text(DERIVED)
    got = auto_size(spec_file, 16384)
    assert got["input_shape"] == (got["num_classes"],) and got["num_classes"] < 4096
    assert got["batch_size"] * got["num_classes"] <= 16384
    spec = load_spec(spec_file, module_name="wb_test_derived")
    spec.apply(got)
    preds, targets = spec.module.get_inputs()
    assert int(targets.max()) < preds.shape[1]  # the spec is valid at the reduced size
