"""The jury: LLM judges with read-only tools over sealed files, and the deterministic rule judge.

```python
service = build(settings, JudgeSpec(judge_id="j1", model="gpt-4o"), campaigns={"c1"})
await start(service)   # JudgeRegistered, then judges every sealed run in scope (back-fill)
```
"""

from .app import build, build_rules, durable_name, serve, serve_rules, start, stop
from .context import ALL_CAMPAIGNS, CampaignScope
from .handlers import JudgeService, ProviderFactory, sampling_times
from .rule_handlers import RULES_ID, RulesService
from .spec import load_judge_spec
from .verdict import Verdict, check_verdict

__all__ = [
    "ALL_CAMPAIGNS",
    "RULES_ID",
    "CampaignScope",
    "JudgeService",
    "ProviderFactory",
    "RulesService",
    "Verdict",
    "build",
    "build_rules",
    "check_verdict",
    "durable_name",
    "load_judge_spec",
    "sampling_times",
    "serve",
    "serve_rules",
    "start",
    "stop",
]
