"""Judge spec files (YAML/TOML/JSON), validated at the edge."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from assay_schemas import ConfigError, JudgeSpec, describe_validation

__all__ = ["load_judge_spec"]


def load_judge_spec(path: Path) -> JudgeSpec:
    """Read one judge spec; a file holding `judge:` or a one-judge `judges:` list also works."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"judge spec {path}: cannot read ({e})") from e
    try:
        data: Any
        if path.suffix in {".yaml", ".yml"}:
            data = yaml.safe_load(text)
        elif path.suffix == ".toml":
            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"judge spec {path}: not valid {path.suffix.lstrip('.')}: {e}") from e
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
