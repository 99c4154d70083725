"""Static work of a kernel: an upper bound on the expression nodes it evaluates over its whole
grid, a Reduce's loop body counted once per iteration. A node shared by several parents counts
once per parent, so the figure overstates; what matters is how it grows with the shapes: it shows
a kernel whose work is quadratic in an axis length (every output walking the whole axis) at
once, without running or timing anything.

A loop bound that is not a constant (one that depends on the element's coordinates, as a window
clipped at the border does) has no static trip count: the work is then None, unknown."""
from __future__ import annotations

from .expr import Const, Expr, Reduce, all_children
from .kernel import Kernel


def _trips(red: Reduce) -> int | None:
    count = 1
    for loop in red.loops:
        start = loop.start.value if isinstance(loop.start, Const) else loop.start
        stop = loop.stop.value if isinstance(loop.stop, Const) else loop.stop
        if not isinstance(start, int) or not isinstance(stop, int):
            return None
        count *= max(0, stop - start)
    return count


def thread_work(root: Expr) -> int | None:
    """The nodes one thread evaluates for `root` (None: a loop of unknown trip count)."""
    memo: dict[int, int | None] = {}

    def cost(node: Expr) -> int | None:
        key = id(node)
        if key in memo:
            return memo[key]
        memo[key] = None                       # a cycle would be a malformed IR: unknown
        if isinstance(node, Reduce):
            trips = _trips(node)
            once = [e for loop in node.loops for e in (loop.start, loop.stop) if isinstance(e, Expr)]
            once += [acc.init for acc in node.accs]
            each = [e for loop in node.loops for _, e in loop.lets] + [g for loop in node.loops for g in loop.guards]
            each += [acc.body for acc in node.accs]
            outside, inside = [cost(e) for e in once], [cost(e) for e in each]
            if trips is None or None in outside or None in inside:
                return None
            total = 1 + sum(outside) + trips * sum(inside)
        else:
            parts = [cost(child) for child in all_children(node)]
            if None in parts:
                return None
            total = 1 + sum(parts)
        memo[key] = total
        return total

    return cost(root)


def kernel_work(kernel: Kernel) -> int | None:
    """thread_work times the threads: the kernel's whole grid."""
    per_thread = thread_work(kernel.value)
    return None if per_thread is None else per_thread * kernel.size
