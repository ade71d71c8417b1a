"""The search graph: nodes (candidates) joined by parent links, in creation order."""

from __future__ import annotations

from typing import Iterator

from workbench.memory.records import Node

__all__ = ["Node", "Tree"]


class Tree:
    """The graph of one run. A node has one parent (mutation), two (crossover) or none (seed, draft).

    The first parent is the primary one: MCTS backs values up along primary-parent chains.
    """

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.children: dict[str, list[str]] = {}
        self.order: list[str] = []

    def add(self, node: Node) -> None:
        if node.id in self.nodes:
            raise ValueError(f"node {node.id} already in the tree")
        self.nodes[node.id] = node
        self.order.append(node.id)
        self.children.setdefault(node.id, [])
        for p in node.parents[:1]:
            self.children.setdefault(p, []).append(node.id)

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return (self.nodes[i] for i in self.order)

    def __getitem__(self, node_id: str) -> Node:
        return self.nodes[node_id]

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.nodes

    def evaluated(self) -> list[Node]:
        return [n for n in self if n.evaluated]

    def roots(self) -> list[Node]:
        return [n for n in self if not n.parents]

    def kids(self, node_id: str) -> list[Node]:
        return [self.nodes[c] for c in self.children.get(node_id, [])]

    def best(self) -> Node | None:
        """The fittest passing node (earliest wins ties), or None when nothing passed yet."""
        best: Node | None = None
        for n in self:
            if n.passed and n.fitness > 0 and (best is None or n.fitness > best.fitness):
                best = n
        return best

    def ancestors(self, node_id: str) -> list[Node]:
        """Primary-parent chain from the root down to (excluding) `node_id`."""
        chain: list[Node] = []
        cur = self.nodes[node_id]
        seen = {cur.id}
        while cur.parents and cur.parents[0] in self.nodes and cur.parents[0] not in seen:
            cur = self.nodes[cur.parents[0]]
            seen.add(cur.id)
            chain.append(cur)
        return chain[::-1]

    def source_hashes(self) -> set[str]:
        return {h for n in self if (h := n.source_hash) is not None}

    def to_json(self) -> dict:
        """The search tree file: every node's summary plus its children (no long texts)."""
        return {"nodes": [dict(n.summary(), children=list(self.children.get(n.id, []))) for n in self]}
