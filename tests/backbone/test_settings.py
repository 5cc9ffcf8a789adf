"""Each service owns its settings; the core's `Settings` keeps only what the core uses and
carries a service's values, unread, to the class that validates them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from assay.config import Settings
from assay_judge.settings import JudgeSettings
from assay_runner.settings import RunnerSettings
from assay_sandbox_manager.settings import SandboxManagerSettings

OWN = (RunnerSettings, SandboxManagerSettings, JudgeSettings)
"""The services' own settings; the CLI's own are checked alike in tests/cli/test_settings.py."""


def test_the_core_names_no_setting_of_a_service() -> None:
    for own in OWN:
        theirs = set(own.model_fields) - set(Settings.model_fields)
        assert theirs, own
        assert not theirs & set(Settings.model_fields)


def test_a_hostile_value_given_to_the_core_is_refused_by_the_class_that_reads_it() -> None:
    carried = Settings(runner_concurrency=0, sandbox_max_live="lots")
    with pytest.raises(ValidationError, match="runner_concurrency"):
        RunnerSettings.of(carried)
    with pytest.raises(ValidationError, match="sandbox_max_live"):
        SandboxManagerSettings.of(carried)


def test_a_service_reads_its_values_from_the_core_settings_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASSAY_SANDBOX_MAX_LIVE", "7")
    monkeypatch.setenv("ASSAY_JUDGE_CHECK_BUDGET_S", "2.5")
    core = Settings(runner_concurrency=3, stream="LAB")
    assert core.model_extra == {"runner_concurrency": 3}  # the environment's are not taken
    runner = RunnerSettings.of(core)
    assert (runner.runner_concurrency, runner.stream) == (3, "LAB")
    assert SandboxManagerSettings.of(core).sandbox_max_live == 7
    copied = core.model_copy(update={"judge_check_budget_s": 1.0})
    assert JudgeSettings.of(copied).judge_check_budget_s == 1.0
    assert JudgeSettings.of(core).judge_check_budget_s == 2.5
    assert RunnerSettings.of(runner) is runner
