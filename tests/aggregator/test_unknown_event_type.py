"""An event type a reader does not know is skipped, not an error: adding a type touches
only the schema and the services that use it, never every fold over the log."""

from __future__ import annotations

from typing import Literal

from assay_aggregator import fold
from assay_schemas import Event, Producer, RunHistory


class MadeUp(Event):
    """A type no reader was written for (as a newer producer might log)."""

    event_type: Literal["MadeUp"] = "MadeUp"
    written_by = ("runner",)


def test_readers_skip_an_event_type_they_do_not_know() -> None:
    event = MadeUp(
        event_id="e-made-up",
        campaign_id="c1",
        run_id="r1",
        producer=Producer(service="x", version="0"),
    )
    history = RunHistory.fold([event])
    assert history.request is None and history.ended is None
    state = fold([(1, event)])
    assert state.last_sequence == 1 and state.applied == 1
    assert event.summary_line() == "MadeUp" and event.blob_refs() == []
