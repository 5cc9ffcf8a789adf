"""Judge spec files (YAML/TOML/JSON), validated at the edge."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from assay_schemas import ConfigError, JudgeSpec, describe_validation, read_structured_file

__all__ = ["load_judge_spec"]


def load_judge_spec(path: Path) -> JudgeSpec:
    """Read one judge spec; a file holding `judge:` or a one-judge `judges:` list also works."""
    data = read_structured_file(path, what="judge spec")
    if isinstance(data, dict) and "judge" in data:
        data = data["judge"]
    elif isinstance(data, dict) and isinstance(data.get("judges"), list):
        if len(data["judges"]) != 1:
            raise ConfigError(f"judge spec {path}: `judges` must hold exactly one judge")
        data = data["judges"][0]
    try:
        return JudgeSpec.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"judge spec {path}: {describe_validation(e)}") from e
