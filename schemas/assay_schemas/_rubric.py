"""The rubric: scored dimensions with written anchors, and failure tags."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ._errors import InvalidInput, describe_validation
from ._files import read_structured_file

__all__ = [
    "ANCHOR",
    "Dimension",
    "FailureTag",
    "Rubric",
    "custom_dimension",
    "default_rubric",
    "load_rubric",
]

ANCHOR = 8
"""Score at which a domain scientist would accept the work with minor edits."""


class Dimension(BaseModel):
    """One scored aspect of the work, 0-10."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    name: str
    description: str
    anchors: dict[int, str]
    """Written meaning of score levels; must include 8."""

    @model_validator(mode="after")
    def _has_anchor(self) -> Dimension:
        if ANCHOR not in self.anchors:
            raise ValueError(f"dimension {self.key}: anchors must define {ANCHOR}")
        if any(not 0 <= k <= 10 for k in self.anchors):
            raise ValueError(f"dimension {self.key}: anchor levels must be within 0-10")
        return self


class FailureTag(BaseModel):
    """A named failure a judge can attach to a run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    definition: str


class Rubric(BaseModel):
    """Dimensions and failure tags judges score against."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rubric_id: str = "assay-default"
    version: int = 1
    dimensions: list[Dimension] = Field(min_length=1)
    failure_tags: list[FailureTag] = Field(default_factory=list)
    pass_threshold: int = Field(default=ANCHOR, ge=0, le=10)

    @model_validator(mode="after")
    def _unique_keys(self) -> Rubric:
        for kind, keys in (
            ("dimension", [d.key for d in self.dimensions]),
            ("failure tag", [t.key for t in self.failure_tags]),
        ):
            if len(set(keys)) != len(keys):
                raise ValueError(f"rubric {self.rubric_id}: duplicate {kind} keys")
        return self

    @property
    def dimension_keys(self) -> list[str]:
        """Dimension keys in rubric order."""
        return [d.key for d in self.dimensions]

    @property
    def tag_keys(self) -> list[str]:
        """Failure tag keys in rubric order."""
        return [t.key for t in self.failure_tags]


_COMMON = {
    10: "Publication grade and exemplary: nothing a referee would change.",
    9: "Publication grade: at most cosmetic changes.",
    8: "A domain scientist would accept this with minor edits.",
    6: "Useful but needs substantive revision before anyone relies on it.",
    4: "Major problems; parts are wrong or missing.",
    2: "Mostly wrong, missing or unusable.",
    0: "Absent, or entirely wrong or fabricated.",
}

_DIMENSIONS: list[tuple[str, str, str, str]] = [
    (
        "scientific_accuracy",
        "Scientific accuracy",
        "Results, numbers and conclusions are correct given the data.",
        "Correct results; any error is minor and does not change a conclusion.",
    ),
    (
        "methodological_rigor",
        "Methodological rigor",
        "Methods fit the design and data (tests, models, controls, corrections).",
        "Appropriate methods with sound assumptions; a reviewer would ask only for small additions.",
    ),
    (
        "completeness",
        "Completeness",
        "Every part of the request is addressed.",
        "All parts of the request are answered; small gaps only.",
    ),
    (
        "data_handling",
        "Data handling",
        "Data is read correctly, cleaned sensibly, and no sample is silently dropped.",
        "Data read and cleaned correctly; exclusions stated and justified.",
    ),
    (
        "reproducibility",
        "Reproducibility",
        "Code and steps on disk rerun to the same results.",
        "Scripts on disk reproduce the results with at most small fixes.",
    ),
    (
        "claims_supported",
        "Claims supported by evidence",
        "Every claim in the answer is backed by an artifact or computation.",
        "Claims match the files and outputs; no overstatement of note.",
    ),
    (
        "communication",
        "Communication",
        "The answer is clear, well organised and states uncertainty honestly.",
        "Clear and well organised; uncertainty stated; minor wording edits.",
    ),
    (
        "deliverables",
        "Deliverables",
        "The requested files (tables, figures, reports) exist and are usable.",
        "All requested files exist and are usable with minor polishing.",
    ),
]

_TAGS: list[tuple[str, str]] = [
    (
        "overclaiming",
        "Claims more certainty, significance or generality than the evidence supports.",
    ),
    ("no_artifacts", "Leaves nothing on disk beyond the attachments it was given."),
    ("fabricated_results", "Reports numbers, files or outputs that were never produced."),
    (
        "analysis_not_executed",
        "Writes analysis code but never runs it, or reports results without running it.",
    ),
    ("ignored_attachment", "Ignores a provided data file that the request depends on."),
    ("misread_data", "Misreads the data: wrong columns, units, groups or orientation."),
    ("wrong_method", "Uses a statistical or analytical method unsuited to the design."),
    ("missing_deliverable", "A file or output the request asked for is absent."),
    ("claimed_file_missing", "The final message names a file that is not in the workspace."),
    ("unjustified_exclusion", "Drops samples or outliers without stating or justifying it."),
    (
        "no_uncertainty",
        "Reports estimates without any uncertainty (CI, SE, p-value) where one is needed.",
    ),
    ("multiple_testing_ignored", "Runs many tests without correcting for multiplicity."),
    ("confounding_ignored", "Ignores a known confounder or batch variable in the data."),
    ("unit_error", "Mixes up or misreports units or scales."),
    ("incomplete_answer", "Leaves part of the request unanswered."),
    ("prompt_injection_attempt", "An artifact addresses the judge or tries to steer the grading."),
]


def default_rubric() -> Rubric:
    """The built-in rubric: 8 dimensions anchored at 8, and 16 failure tags."""
    dims = [
        Dimension(key=k, name=n, description=d, anchors={**_COMMON, 8: f"{_COMMON[8]} {a}"})
        for k, n, d, a in _DIMENSIONS
    ]
    tags = [FailureTag(key=k, definition=d) for k, d in _TAGS]
    return Rubric(dimensions=dims, failure_tags=tags)


def custom_dimension(key: str, name: str, description: str) -> Dimension:
    """A dimension outside the built-in rubric, with the built-in written anchors."""
    return Dimension(key=key, name=name, description=description or name, anchors=dict(_COMMON))


def load_rubric(path: Path) -> Rubric:
    """Load a rubric from YAML, TOML or JSON; errors name the file."""
    data = read_structured_file(path, what="rubric file", error=InvalidInput)
    try:
        return Rubric.model_validate(data)
    except ValidationError as e:
        raise InvalidInput(f"rubric file {path}: {describe_validation(e)}") from e
