"""The CLI owns its settings as each service does: the core's `Settings` names none of them."""

from __future__ import annotations

from assay.config import Settings
from assay_cli.settings import CliSettings


def test_the_core_names_no_setting_of_the_cli() -> None:
    theirs = set(CliSettings.model_fields) - set(Settings.model_fields)
    assert theirs, CliSettings
    assert not theirs & set(Settings.model_fields)
