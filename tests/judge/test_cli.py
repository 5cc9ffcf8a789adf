"""`assay judge --spec FILE --campaign ID` hot-adds a judge from the command line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from assay_judge import load_judge_spec
from assay_schemas import ConfigError, JudgeRegistered
from assay_testing.pipeline import wait_for_output

from .cases import SCRIPTED_KEY, Judging, judgments, of_type, reading_judge, verdict

pytestmark = pytest.mark.timeout(60)


def test_spec_files_are_validated(tmp_path: Path) -> None:
    good = tmp_path / "j.yaml"
    good.write_text(
        yaml.safe_dump({"judge": {"judge_id": "j1", "model": "m", "sampling_times": 3}})
    )
    assert load_judge_spec(good).sampling_times == 3
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"judge_id": "j 1", "model": "m"}))
    with pytest.raises(ConfigError, match=r"judge spec .*bad.yaml: judge_id"):
        load_judge_spec(bad)


async def test_cli_judge_backfills_until_interrupted(
    judging: Judging,
    tmp_path: Path,
) -> None:
    model = judging.scripted(
        reading_judge([("read_file", {"path": "o.txt"})], verdict(9, files=["o.txt"]))
    )
    await judging.seal("r1", files={"o.txt": b"x"}, final_message="ok")
    await judging.seal("r2", campaign_id="other", files={"o.txt": b"y"}, final_message="ok")
    spec = tmp_path / "judge.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "judge_id": "cli-judge",
                "model": model,
                "base_url": judging.server.openai_base_url,
                "api_key_env": SCRIPTED_KEY,
            }
        )
    )
    settings = judging.settings
    env = {
        **os.environ,
        "ASSAY_NATS_URL": settings.nats_url,
        "ASSAY_STREAM": settings.stream,
        "ASSAY_SUBJECT_PREFIX": settings.subject_prefix,
        "ASSAY_HOME": str(settings.home),
    }
    printed = tmp_path / "judge.out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "assay_cli", "judge", "--spec", str(spec), "--campaign", "c1"],
        env=env,
        stdout=printed.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        events = await judging.wait(lambda evs: bool(judgments(evs, "cli-judge")), timeout=30)
        # Its back-fill says it is done (as `assay serve judge` does).
        await wait_for_output(printed, "1 of 1 runs judged")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    out = printed.read_bytes()
    assert proc.returncode == 0, out.decode()
    assert b"cli-judge" in out
    assert b"1 of 1 runs judged" in out, out.decode()
    [judgment] = judgments(events, "cli-judge")
    assert judgment.run_id == "r1" and judgment.files_opened == ["o.txt"]
    assert [r.campaign_id for r in of_type(events, JudgeRegistered)] == ["c1"]


def test_public_names_are_exported() -> None:
    import assay_judge

    assert all(hasattr(assay_judge, name) for name in assay_judge.__all__)
    assert {"build", "build_rules", "JurySupervisor", "load_judge_spec"} <= set(assay_judge.__all__)
