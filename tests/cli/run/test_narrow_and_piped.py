"""Issue #53 items 2 and 3: a terminal 80 columns wide, and output piped to a file.

At ``COLUMNS=80`` no line of `assay events`, `assay trace`, `assay report` or
`assay --help` is longer than 80 characters; piped, `assay run`'s progress table ends
its last line before the report begins.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.e2e.test_run_outcome import ROOT, one_task

pytestmark = pytest.mark.timeout(400)

WIDTH = 80


def _env(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "COLUMNS": str(WIDTH),
        "ASSAY_HOME": str(tmp / "home"),
        "ASSAY_STATE_DIR": str(tmp / "state"),
    }


def _assay(tmp: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "assay_cli", *args],
        cwd=ROOT,
        env=_env(tmp),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > WIDTH]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """`assay run` of one bundled task, piped, at 80 columns: its state folder, run
    directory and standard output."""
    tmp = tmp_path_factory.mktemp("narrow")
    tasks, campaign = one_task(tmp)
    out = _assay(tmp, "run", str(tasks), "--campaign", str(campaign), "--skip-checks")
    [run_dir] = list((tmp / "home" / "runs").glob("small-*"))
    return tmp, run_dir, out


def test_piped_progress_ends_its_line_before_the_report(ran: tuple[Path, Path, str]) -> None:
    _, _, out = ran
    corners = [line for line in out.splitlines() if "┘" in line]
    assert corners, "the progress table is printed"
    for line in corners:
        assert line.rstrip().endswith("┘"), f"the table's last line runs on: {line!r}"


def _run_id(tmp: Path, run_dir: Path) -> str:
    for line in _assay(tmp, "events", "--json", "--home", str(run_dir)).splitlines():
        event = json.loads(line)
        if event["event_type"] == "RunRequested":
            return str(event["run_id"])
    raise AssertionError("no run requested")


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["events"],
        ["report"],
        ["trace", "<run>"],
    ],
    ids=["help", "events", "report", "trace"],
)
def test_no_line_is_wider_than_an_80_column_terminal(
    ran: tuple[Path, Path, str], args: Sequence[str]
) -> None:
    tmp, run_dir, _ = ran
    args = [_run_id(tmp, run_dir) if a == "<run>" else a for a in args]
    home = [] if args == ["--help"] else ["--home", str(run_dir)]
    out = _assay(tmp, *args, *home)
    assert out.strip(), "the command printed something"
    assert _too_wide(out) == [], f"`assay {' '.join(args)}` at {WIDTH} columns"


def test_the_run_report_itself_fits_80_columns(ran: tuple[Path, Path, str]) -> None:
    """Every line but those naming a path of this machine (a command to copy whole, the
    report's files), which are as long as the path is."""
    tmp, _, out = ran
    assert [line for line in _too_wide(out) if str(tmp) not in line] == []
