"""The leak guard (tests/leakguard.py) fails a session that leaves a client open (#53).

Each case is its own pytest run in a subprocess, with only the guard as a plugin: a
session dropped unclosed (aiohttp's "Unclosed client session"), one kept open to the
end, a NATS connection kept open; and the same clients closed, which pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.embedded import NatsServer

ROOT = Path(__file__).resolve().parents[1]

_DROPPED = """
import aiohttp

async def test_drops_a_session() -> None:
    aiohttp.ClientSession()
"""
_KEPT = """
import aiohttp

KEPT = []

async def test_keeps_a_session() -> None:
    KEPT.append(aiohttp.ClientSession())
"""
_CLOSED = """
import aiohttp
import nats

async def test_closes_what_it_opens() -> None:
    session = aiohttp.ClientSession()
    await session.close()
    async with aiohttp.ClientSession():
        pass
    nc = await nats.connect("{url}")
    await nc.close()
"""
_NATS_KEPT = """
import nats

KEPT = []

async def test_keeps_a_connection() -> None:
    KEPT.append(await nats.connect("{url}"))
"""


@pytest.fixture(autouse=True)
def _guard_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The subprocess imports the guard as `tests.leakguard`, from the repository root."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


def _run(pytester: pytest.Pytester, source: str) -> pytest.RunResult:
    pytester.makepyfile(test_case=source)
    pytester.makeini("[pytest]\nasyncio_mode = auto\n")
    return pytester.runpytest_subprocess("-p", "tests.leakguard", "-p", "no:cacheprovider")


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (
            _DROPPED,
            "aiohttp ClientSession made in test_case.py::test_drops_a_session, collected unclosed",
        ),
        (_KEPT, "aiohttp ClientSession made in test_case.py::test_keeps_a_session, still open"),
        (_NATS_KEPT, "NATS connection made in test_case.py::test_keeps_a_connection, still open"),
    ],
    ids=["session-dropped", "session-kept", "nats-kept"],
)
def test_a_client_left_open_fails_the_session(
    pytester: pytest.Pytester, nats_server: NatsServer, source: str, said: str
) -> None:
    result = _run(pytester, source.replace("{url}", nats_server.url))
    result.assert_outcomes(passed=1)  # the test itself passes: the guard fails the session
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["*clients left open*", f"*{said}*"])


def test_clients_closed_pass(pytester: pytest.Pytester, nats_server: NatsServer) -> None:
    result = _run(pytester, _CLOSED.replace("{url}", nats_server.url))
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "clients left open" not in result.stdout.str()
