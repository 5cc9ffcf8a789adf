"""The jury: LLM judges with read-only tools over sealed files, and the deterministic rule judge.

```python
service = build(settings, JudgeSpec(judge_id="j1", model="gpt-4o"), campaigns={"c1"})
await service.start()   # JudgeRegistered, then judges every sealed run in scope (back-fill)
```
"""

from .backfill import ProgressSink
from .context import ALL_CAMPAIGNS, CampaignScope
from .handlers import JudgeService, JurySupervisor, ProviderFactory, RulesService, sampling_times
from .llm.verdict import Verdict, check_verdict
from .service import build, build_jury, build_rules, durable_name, judge_scope
from .spec import load_judge_spec

__all__ = [
    "ALL_CAMPAIGNS",
    "CampaignScope",
    "JudgeService",
    "JurySupervisor",
    "ProgressSink",
    "ProviderFactory",
    "RulesService",
    "Verdict",
    "build",
    "build_jury",
    "build_rules",
    "check_verdict",
    "durable_name",
    "judge_scope",
    "load_judge_spec",
    "sampling_times",
]
