"""The judges' handlers: a sealed run in, verdicts out (`llm`, `rules`); campaigns in,
judges started (`jury`). Their wiring to the bus is `assay_judge.service`."""

from .jury import JudgeFactory, JurySupervisor
from .llm import JudgeService, ProviderFactory, sampling_times
from .rules import RulesService

__all__ = [
    "JudgeFactory",
    "JudgeService",
    "JurySupervisor",
    "ProviderFactory",
    "RulesService",
    "sampling_times",
]
