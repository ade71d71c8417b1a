"""Boolean mask indices (`x[mask]`, `x[mask] = v`) rewritten to the integer indices they stand for.

ATen itself turns a bool index of k dims into the k columns of its `nonzero()` (`expandTensors` in
TensorAdvancedIndexing), and so does this pass, on the captured graph before emission: `index` / `index_put` then
take k integer index tensors at the mask's dims, which gather.py's multi-index kernel lowers, and `nonzero` is
compaction.py's count / scan / write kernels (the host reads one number, the count). A 0-d mask (`x[True]`) is
left as it is (unsupported).
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.graph import val

aten = torch.ops.aten
_TARGETS = (aten.index.Tensor, aten.index_put.default, aten.index_put_.default)


def _is_mask(t: object) -> bool:
    return isinstance(t, fx.Node) and isinstance(val(t), torch.Tensor) and val(t).dtype in (torch.bool, torch.uint8) \
        and val(t).dim() > 0


def expand_mask_indices(graph: fx.Graph) -> int:
    """Rewrite every mask index of `index` / `index_put` in place; the number of masks rewritten."""
    done = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _TARGETS or not any(map(_is_mask, node.args[1])):
            continue
        new: list[object] = []
        with graph.inserting_before(node):
            for t in node.args[1]:
                if not _is_mask(t):
                    new.append(t)
                    continue
                nz = graph.call_function(aten.nonzero.default, (t,))
                nz.meta["val"] = aten.nonzero.default(val(t))  # a fake tensor of unbacked length, as export makes
                for d in range(val(t).dim()):
                    col = graph.call_function(aten.select.int, (nz, 1, d))
                    col.meta["val"] = aten.select.int(nz.meta["val"], 1, d)
                    new.append(col)
                done += 1
        node.args = (node.args[0], new, *node.args[2:])
    return done
