"""Reading the configuration files people write: campaigns, rubrics, judge specs, task metadata."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import yaml

from ._errors import AssayError, ConfigError

__all__ = ["read_structured_file"]


def read_structured_file(path: Path, *, what: str, error: type[AssayError] = ConfigError) -> Any:
    """Parse a YAML (.yaml/.yml), TOML (.toml) or JSON (anything else) file.

    Raises `error` naming `what` and the file when it cannot be read or parsed.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise error(f"{what} {path} not found") from e
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{what} {path}: cannot read ({e})") from e
    try:
        if path.suffix in {".yaml", ".yml"}:
            return yaml.safe_load(text)
        if path.suffix == ".toml":
            return tomllib.loads(text)
        return json.loads(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        kind = path.suffix.lstrip(".") or "json"
        raise error(f"{what} {path}: not valid {kind}: {e}") from e
