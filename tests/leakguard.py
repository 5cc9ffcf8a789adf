"""A pytest plugin that fails the session when a test leaves a client open (#53 item 8).

aiohttp reports an unclosed `ClientSession` only when it is garbage-collected, through
the event loop's exception handler: at interpreter exit that is one log line after the
summary ("Unclosed client session"), and the run still passes. A NATS connection left
open says nothing at all. This plugin records the test that made each session and
connection (weakly: no object lives longer for it), notes each session collected
unclosed, and at the end of the session collects garbage and fails the run, naming the
test behind each session or connection still open or dropped open.

Registered by tests/conftest.py; its own test is tests/test_leakguard.py.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from nats.aio.client import Client as NatsClient

_OUTSIDE = "(outside any test)"
_MADE_IN = "_leakguard_made_in"


def _made_in(obj: object) -> str:
    return str(getattr(obj, _MADE_IN, _OUTSIDE))


@dataclass
class _Guard:
    """The session's record: who made each live client, what was dropped unclosed."""

    test: str = _OUTSIDE
    live: weakref.WeakSet[object] = field(default_factory=weakref.WeakSet)
    dropped: list[str] = field(default_factory=list)
    """'session made in <test>' for each aiohttp session collected while still open."""

    def made(self, obj: object) -> None:
        # On the object itself, not in a weak mapping: a cycle's weak references are
        # cleared before its __del__ runs. object.__setattr__: aiohttp warns on its own.
        object.__setattr__(obj, _MADE_IN, self.test)
        self.live.add(obj)

    def leaks(self) -> list[str]:
        """Every client still open or dropped open, with the test that made it."""
        gc.collect()  # unreachable sessions in cycles: their __del__ runs now
        out = [f"aiohttp ClientSession made in {t}, collected unclosed" for t in self.dropped]
        for obj in list(self.live):
            test = _made_in(obj)
            if isinstance(obj, aiohttp.ClientSession) and not obj.closed:
                out.append(f"aiohttp ClientSession made in {test}, still open")
            elif isinstance(obj, NatsClient) and _nats_open(obj):
                out.append(f"NATS connection made in {test}, still open")
        return out


def _nats_open(client: NatsClient) -> bool:
    # A client never connected (or whose connect failed) holds nothing: only these hold
    # a socket or a reconnect loop.
    return bool(
        client.is_connected or client.is_connecting or client.is_reconnecting or client.is_draining
    )


_guard = _Guard()


def _wrap_init(cls: type) -> None:
    original: Callable[..., None] = cls.__init__  # type: ignore[misc]

    def __init__(self: object, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        _guard.made(self)

    cls.__init__ = __init__  # type: ignore[misc]


def _wrap_session_del() -> None:
    original = aiohttp.ClientSession.__del__

    def __del__(self: aiohttp.ClientSession, *args: Any) -> None:
        try:
            unclosed = not self.closed
        except AttributeError:  # its __init__ failed: nothing was opened
            unclosed = False
        if unclosed:
            _guard.dropped.append(_made_in(self))
        original(self, *args)

    aiohttp.ClientSession.__del__ = __del__  # type: ignore[method-assign]


_wrap_init(aiohttp.ClientSession)
_wrap_init(NatsClient)
_wrap_session_del()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fixtures made for a test are attributed to it (session fixtures to the first)."""
    _guard.test = item.nodeid


@pytest.hookimpl(trylast=True)  # after pytest's own, which tears down what -x left set up
def pytest_sessionfinish(session: pytest.Session) -> None:
    """After every fixture's teardown: any client still open fails the run."""
    _guard.test = _OUTSIDE
    leaks = _guard.leaks()
    session.config.stash[_LEAKS] = leaks
    if leaks and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Name each leak, with the test that made it."""
    leaks = config.stash.get(_LEAKS, [])
    if leaks:
        terminalreporter.section("clients left open (tests/leakguard.py)", red=True)
        for line in leaks:
            terminalreporter.line(line, red=True)


_LEAKS = pytest.StashKey[list[str]]()
