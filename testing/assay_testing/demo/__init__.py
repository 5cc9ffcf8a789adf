"""The bundled demo's scripted cast: agents and judges served by the scripted model server."""

from ._agents import agent_scripts, task_id_of
from ._judges import JudgeTemper, judge_script, judge_scripts

__all__ = ["JudgeTemper", "agent_scripts", "judge_script", "judge_scripts", "task_id_of"]
