"""SSA dominance, which xDSL's verifier does not check and mlir-opt does.

A use is valid when the value's definition dominates it: earlier in the same block,
in a block that dominates the use's block in the same region, or in an enclosing
region, never across an op that is isolated from above. Regions of ops that hold
symbols (modules) are graph regions, where order does not matter.
"""

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.traits import IsolatedFromAbove, OpTrait, SymbolTable


class DominanceInfo:
    """Answers "does this value dominate this use?", caching per block and region."""

    def __init__(self) -> None:
        self._op_index: dict[Block, dict[Operation, int]] = {}
        self._dominators: dict[Region, dict[Block, set[Block]]] = {}

    def value_dominates(self, value: SSAValue, user: Operation) -> bool:
        if isinstance(value, BlockArgument):
            return self._block_dominates(value.block, user)
        if isinstance(value, OpResult):
            return self._op_dominates(value.op, user)
        return False

    def _block_dominates(self, block: Block, user: Operation) -> bool:
        """A block argument dominates what its block, and the blocks it dominates, hold."""
        ancestor = _ancestor_in_region(user, block.parent)
        if ancestor is None or ancestor.parent is None:
            return False
        return self._block_dominates_block(block, ancestor.parent)

    def _op_dominates(self, definer: Operation, user: Operation) -> bool:
        block = definer.parent
        if block is None or block.parent is None:
            return False
        ancestor = _ancestor_in_region(user, block.parent)
        if ancestor is None or ancestor is definer or ancestor.parent is None:
            return False
        if _is_graph_region(block.parent):
            return True
        if ancestor.parent is block:
            index = self._index(block)
            return index[definer] < index[ancestor]
        return self._block_dominates_block(block, ancestor.parent)

    def _index(self, block: Block) -> dict[Operation, int]:
        index = self._op_index.get(block)
        if index is None:
            index = {op: i for i, op in enumerate(block.ops)}
            self._op_index[block] = index
        return index

    def _block_dominates_block(self, dominator: Block, block: Block) -> bool:
        if dominator is block:
            return True
        region = block.parent
        if region is None or dominator.parent is not region:
            return False
        doms = self._dominators.get(region)
        if doms is None:
            doms = _compute_dominators(region)
            self._dominators[region] = doms
        return dominator in doms.get(block, set())


def _ancestor_in_region(op: Operation, region: Region | None) -> Operation | None:
    """The op in `region` that is or contains `op`; None when `region` does not
    enclose it or an isolated-from-above op stands in between."""
    current: Operation | None = op
    while current is not None:
        block = current.parent
        if block is None:
            return None
        if block.parent is region:
            return current
        parent = current.parent_op()
        if parent is not None and has_trait(parent, IsolatedFromAbove):
            if parent.parent is None or parent.parent.parent is not region:
                return None
        current = parent
    return None


# Per op class and trait, whether the class has it: `has_trait` is a class method in xDSL
# 0.74 that searches the class's traits, and the verifier asked it of every op of a large
# schedule, several times.
_TRAITS: dict[tuple[type[Operation], type[OpTrait]], bool] = {}


def has_trait(op: Operation, trait: type[OpTrait]) -> bool:
    """`op.has_trait(trait)`, found once per class of op."""
    key = (type(op), trait)
    found = _TRAITS.get(key)
    if found is None:
        found = _TRAITS[key] = op.has_trait(trait)
    return found


def _is_graph_region(region: Region) -> bool:
    parent = region.parent
    return isinstance(parent, ModuleOp) or (parent is not None and has_trait(parent, SymbolTable))


def _successors(block: Block) -> list[Block]:
    last = block.last_op
    return list(last.successors) if last is not None else []


def _compute_dominators(region: Region) -> dict[Block, set[Block]]:
    """Iterative dataflow; regions with several blocks are rare and small here."""
    blocks = list(region.blocks)
    if not blocks:
        return {}
    preds: dict[Block, list[Block]] = {b: [] for b in blocks}
    for b in blocks:
        for s in _successors(b):
            if s in preds:
                preds[s].append(b)
    entry = blocks[0]
    everything = set(blocks)
    doms = {b: ({b} if b is entry else set(everything)) for b in blocks}
    changed = True
    while changed:
        changed = False
        for b in blocks[1:]:
            incoming = [doms[p] for p in preds[b]]
            new = (set.intersection(*incoming) if incoming else set()) | {b}
            if new != doms[b]:
                doms[b] = new
                changed = True
    return doms
