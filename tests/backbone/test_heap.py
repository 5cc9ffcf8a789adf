"""`collector_paused`: the cycle collector is off inside and as it was after, whatever
happens inside; a cycle made inside is still collected after."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import weakref
from collections.abc import Iterator

import pytest

from assay.heap import collector_paused


class _Node:
    me: object


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


@pytest.mark.usefixtures("collector_on")
def test_the_collector_is_off_inside_and_on_again_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
        cycle = _Node()
        cycle.me = cycle
        made_inside = weakref.ref(cycle)
        del cycle
        kept = [_Node() for _ in range(10_000)]  # would set off collections if on
        assert made_inside() is not None
        del kept
    assert gc.isenabled()
    gc.collect()
    assert made_inside() is None


@pytest.mark.usefixtures("collector_on")
def test_an_error_inside_turns_the_collector_back_on() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("the fold failed")
    assert gc.isenabled()


def test_a_collector_already_off_stays_off() -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # whoever turned it off turns it on
    finally:
        if was:
            gc.enable()


def test_nothing_stays_frozen_after_and_a_frozen_heap_stays_frozen() -> None:
    """What the work made is handed to the oldest generation, not left frozen; a heap a
    service froze on purpose (`settle_heap`) stays frozen. In a process of its own, since
    freezing this one would hide every later test's garbage from the collector."""
    probe = textwrap.dedent(
        """
        import gc, json
        from assay.heap import collector_paused
        with collector_paused():
            made = [[i] for i in range(1000)]
        unfrozen = gc.get_freeze_count()
        gc.freeze()
        frozen = gc.get_freeze_count()
        with collector_paused():
            more = [[i] for i in range(1000)]
        print(json.dumps([unfrozen, frozen, gc.get_freeze_count()]))
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    unfrozen, frozen, after = json.loads(done.stdout)
    assert unfrozen == 0
    assert frozen > 1000 and after == frozen


@pytest.mark.usefixtures("collector_on")
def test_a_projection_table_is_built_with_the_collector_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 10x state's tables make a million rows: built with the collector on, their
    allocations set off full passes over the state they read (as `build_report` knew)."""
    from assay_report import Projections, State

    seen: list[bool] = []

    def rows(self: Projections) -> list[tuple[object, ...]]:
        seen.append(gc.isenabled())
        return []

    monkeypatch.setattr(Projections, "_runs_rows", rows)
    assert Projections(State()).table("runs").height == 0
    assert seen == [False]
    assert gc.isenabled()
