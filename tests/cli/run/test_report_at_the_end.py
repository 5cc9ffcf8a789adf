"""`assay run` prints its report only once every run has reached its terminal outcome (its
seal and every verdict owed), so the report it printed is the one its run directory shows
when reopened, byte for byte; and `assay replay --verify` reads a seal's manifest stored as
a blob exactly as the live aggregator does."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from assay.config import Settings
from assay.embedded import find_free_port
from tests.e2e.test_run_outcome import ROOT, assay_run, one_task

pytestmark = pytest.mark.timeout(600)

KEY_ENV = "ASSAY_TEST_UNREACHABLE_KEY"
FILES = 2_500
# A program agent that calls no model: it leaves FILES files and its answer.
WRITER = (
    "import os\n"
    "os.makedirs('out', exist_ok=True)\n"
    f"for i in range({FILES}):\n"
    "    open(f'out/f{i:05d}.txt', 'w').write(f'file {i}\\n')\n"
    "open('answer.txt', 'w').write('dCt 2.0, ddCt -1.0, fold change 2.0')\n"
)


def _assay(run_dir: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """`assay ARGS --home RUN_DIR`, as a user would type it after the run."""
    return subprocess.run(
        [sys.executable, "-m", "assay_cli", *args, "--home", str(run_dir)],
        cwd=ROOT,
        # Nothing listens here: only the run directory can answer.
        env={
            **os.environ,
            "COLUMNS": "200",
            "ASSAY_NATS_URL": f"nats://127.0.0.1:{find_free_port()}",
        },
        capture_output=True,
        timeout=180,
    )


def _reopened(run_dir: Path) -> tuple[str, bytes]:
    """The report of a reopened run directory: as printed, and as JSON."""
    text = _assay(run_dir, "report")
    assert text.returncode == 0, text.stderr.decode()
    data = _assay(run_dir, "report", "--json", "-")
    assert data.returncode == 0, data.stderr.decode()
    return text.stdout.decode(), data.stdout


def _run_dir(settings: Settings, campaign_id: str) -> Path:
    [run_dir] = list((settings.home / "runs").glob(f"{campaign_id}-*"))
    return run_dir


def _unreachable(tmp_path: Path, port: int | None = None) -> tuple[Path, Path]:
    """One task and a campaign whose models are at a loopback port: a closed one (nothing
    listens: connection refused) unless PORT is given."""
    tasks, _ = one_task(tmp_path)
    url = f"http://127.0.0.1:{port or find_free_port()}/v1"
    model = {"base_url": url, "api_key_env": KEY_ENV}
    campaign = tmp_path / "unreachable.yaml"
    campaign.write_text(
        yaml.safe_dump(
            {
                "campaign_id": "unreachable",
                "agents": [{"agent_id": "lost", "model": "m", "family": "acme", **model}],
                "judges": [{"judge_id": "j", "model": "m", "family": "orbit", **model}],
            }
        )
    )
    return tasks, campaign


def test_an_unreachable_model_is_an_infrastructure_failure_printed_and_reopened(
    settings: Settings, tmp_path: Path
) -> None:
    """Issue #54, case 2: the run fails (its model server is unreachable), then its files
    are sealed. The report `assay run` printed and wrote and the one reopened later both
    count it as an infrastructure failure, and the log's invariants hold. (Once also in
    tests/e2e/test_run_outcome.py, which ran the same campaign again: its checks are here.)"""
    tasks, campaign = _unreachable(tmp_path)
    out = assay_run(settings, tasks, campaign, **{KEY_ENV: "not-a-key"})
    printed = out.stdout
    assert out.returncode == 1, printed[-3000:] + out.stderr[-3000:]
    run_dir = _run_dir(settings, "unreachable")

    # The run failed, and its files were sealed afterwards: the report waited for the seal.
    events = _assay(run_dir, "events", "--json")
    assert events.returncode == 0, events.stderr.decode()
    kinds = [json.loads(line)["event_type"] for line in events.stdout.decode().splitlines()]
    assert "RunFailed" in kinds and "ArtifactsSealed" in kinds
    assert kinds.index("RunFailed") < kinds.index("ArtifactsSealed")

    text, data = _reopened(run_dir)
    assert data == (run_dir / "report.json").read_bytes(), "report.json is the reopened report"
    assert text in printed, "the printed report is the reopened one, byte for byte"
    assert "did not go as planned" in text

    # An infrastructure failure, in both (a later seal keeps the failure: see `lifecycle`).
    for doc in (json.loads((run_dir / "report.json").read_bytes()), json.loads(data)):
        assert doc["infrastructure_failures"] == [
            {"agent_id": "lost", "stage": "agent", "n_runs": 1}
        ]
        assert doc["run_states"] == [{"n_runs": 1, "state": "failed"}]
    assert "assay check: clean: 1 runs" in printed
    check = _assay(run_dir, "check", "--json")
    assert check.returncode == 0 and json.loads(check.stdout)["clean"], check.stdout


def test_a_wait_given_up_says_so_and_exits_non_zero(settings: Settings, tmp_path: Path) -> None:
    # A model that never answers: connections are taken (the kernel's backlog) and never
    # read, so the run cannot end before the wait is given up. (A refused connection made
    # this race: on a quiet machine the run failed, and so ended, inside the second.)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        tasks, campaign = _unreachable(tmp_path, silent.getsockname()[1])
        out = assay_run(settings, tasks, campaign, "--timeout", "1", **{KEY_ENV: "not-a-key"})
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert "timed out after 1 s with work pending" in out.stderr
    assert "1 expected run(s) never ended" in out.stderr
    # What was in by then is still reported, from the whole log.
    run_dir = _run_dir(settings, "unreachable")
    text, data = _reopened(run_dir)
    assert data == (run_dir / "report.json").read_bytes()
    assert text in out.stdout


def test_a_program_leaving_thousands_of_files_replays_identically(
    settings: Settings, tmp_path: Path
) -> None:
    tasks, _ = one_task(tmp_path)
    program = {"command": ["python3", "-c", WRITER], "answer_file": "answer.txt"}
    agent = {"agent_id": "writer", "model": "scripted-careful", "family": "acme"}
    judge = {"judge_id": "judge-strict", "model": "scripted-judge-strict", "family": "orbit"}
    spec = {
        "campaign_id": "many-files",
        "scripted": True,
        "sandbox": {"max_artifact_files": FILES + 100},
        "agents": [{**agent, "kind": "program", "program": program}],
        "judges": [judge],
    }
    campaign = tmp_path / "many-files.yaml"
    campaign.write_text(yaml.safe_dump(spec))
    out = assay_run(settings, tasks, campaign)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run_dir = _run_dir(settings, "many-files")

    events = _assay(run_dir, "events", "--json")
    assert events.returncode == 0, events.stderr.decode()
    [seal] = [
        e
        for e in map(json.loads, events.stdout.decode().splitlines())
        if e["event_type"] == "ArtifactsSealed"
    ]
    # The case at hand: the manifest is too large to inline, so it is a blob.
    assert seal["manifest"] is not None and seal["files"] == []
    assert seal["file_count"] > FILES  # its files, its answer and the task's attachments

    verify = _assay(run_dir, "replay", "--verify")
    said = verify.stdout.decode() + verify.stderr.decode()
    assert verify.returncode == 0, said[-4000:]
    assert "identical" in said and "differ" not in said

    # Every file counts in the report (none read as an empty seal), printed and reopened.
    text, data = _reopened(run_dir)
    assert data == (run_dir / "report.json").read_bytes()
    assert text in out.stdout
    report = json.loads(data)
    assert report["run_states"] == [{"n_runs": 1, "state": "judged"}]
    assert [r["n_empty"] for r in report["statistics"]["empty_artifact_rates"]] == [0]
