"""A forward of many outputs, each sized by a count in the input (as an ATen spec of hundreds of `unique`
calls is): every row of `x` cut to its length in `lens`, doubled."""
import torch
import torch.nn as nn

R = 40  # past opcheck.MAX_VALUES_PER_CALL: one count per output must still be allowed
SHAPES = {"small_odd": {"R": 40}}
CPU_SHAPES = ["small_odd"]


class Model(nn.Module):
    def forward(self, x, lens):
        return tuple(x[i, :lens[i]] * 2.0 for i in range(x.shape[0]))


def get_inputs():
    return [torch.randn(R, 9), torch.randint(1, 10, (R,))]


def get_init_inputs():
    return []
