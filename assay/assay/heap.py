"""The cycle collector around work over a large, acyclic heap (a folded state)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off inside, back as it was after.

    For work that makes or reads millions of objects none of which is garbage: a folded
    state, a snapshot's body, a report's tables over them. Every few hundred allocations
    the collector walks the young objects, and now and then all of them: one full pass
    over a 10x state costs about half a second, and a report's allocations set one off.

    What the work made is then still young, so the first collection after would walk it
    all (a fifth of a second for a 10x state). Instead it joins the oldest generation
    unwalked (`gc.freeze` then `gc.unfreeze`: two list splices), where only a full
    collection looks at it, and cycles among it (a caught exception's traceback) are
    collected then. Not in a process that froze its heap on purpose (a started service,
    `assay.service.settle_heap`): unfreezing would hand that heap back to the collector,
    so there the first collection walks the work's objects as before.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if enabled:
            gc.enable()
