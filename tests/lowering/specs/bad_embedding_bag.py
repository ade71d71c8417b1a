"""Unsupported: embedding_bag (a gather reduced per bag) has no primitive (lowering must name the aten op)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, w):
        return nn.functional.embedding_bag(torch.tensor([0, 2, 1, 3]), w, torch.tensor([0, 2]))


def get_inputs():
    return [torch.randn(4, 5)]


def get_init_inputs():
    return []
