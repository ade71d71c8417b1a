import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.c2 = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.c3 = nn.Conv1d(4, 6, 2, dilation=2, bias=False)
        self.c4 = nn.Conv3d(2, 4, (1, 2, 3), padding=(0, 1, 1), groups=2)
        self.mp = nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)

    def forward(self, x, z):
        y = torch.relu(self.c1(x)) * 2.0
        y = self.c2(y)
        w = self.c3(y.flatten(2))
        a = nn.functional.avg_pool2d(y, 3, stride=2, padding=1, count_include_pad=False)
        return w, self.mp(y), a, self.c4(z), nn.functional.max_pool1d(w, 2)


def get_inputs():
    return [torch.randn(2, 3, 9, 7), torch.randn(2, 2, 3, 4, 5)]


def get_init_inputs():
    return []
