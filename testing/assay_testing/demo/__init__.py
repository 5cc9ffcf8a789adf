"""The bundled demo's scripted cast: agents and judges served by the scripted model server."""

from ._agents import agent_scripts, task_id_of
from ._campaign import SCRIPTED_KEY_ENV, scripted_campaign
from ._judges import JudgeTemper, judge_script, judge_scripts

__all__ = [
    "SCRIPTED_KEY_ENV",
    "JudgeTemper",
    "agent_scripts",
    "judge_script",
    "judge_scripts",
    "scripted_campaign",
    "task_id_of",
]
