"""A service process settles its heap once started: what start-up made is frozen out of
the collector's scans, start-up's garbage is freed first, and later garbage still is."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from assay.service import YOUNG_OBJECTS

# Runs in a process of its own: freezing the test process's heap would keep every later
# test's garbage cycles alive.
_PROBE = textwrap.dedent(
    """
    import asyncio, gc, json, os, signal, weakref
    from assay.service import run_until_signal

    class Node:
        pass

    class Probe:
        async def start(self):
            cycle = Node()
            cycle.me = cycle  # start-up's garbage: a cycle only the collector frees
            self.startup_garbage = weakref.ref(cycle)
            del cycle
            asyncio.get_running_loop().call_soon(self.check)

        def check(self):
            later = Node()
            later.me = later
            freed_later = weakref.ref(later)
            del later
            gc.collect()
            self.seen = {
                "frozen": gc.get_freeze_count(),
                "threshold": list(gc.get_threshold()),
                "startup_garbage_freed": self.startup_garbage() is None,
                "later_garbage_freed": freed_later() is None,
                "enabled": gc.isenabled(),
            }
            os.kill(os.getpid(), signal.SIGTERM)

        async def stop(self):
            print(json.dumps(self.seen))

    asyncio.run(run_until_signal([Probe()]))
    """
)


def test_a_started_service_freezes_what_start_up_made_and_still_collects() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["frozen"] > 10_000, seen  # the imported modules and their objects at least
    assert seen["threshold"][0] == YOUNG_OBJECTS
    assert seen["startup_garbage_freed"], "start-up's garbage was frozen, not freed"
    assert seen["later_garbage_freed"] and seen["enabled"], seen
