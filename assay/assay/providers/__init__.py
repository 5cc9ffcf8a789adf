"""Talk to models: a normalized conversation, OpenAI/Anthropic providers, retries, limits, cost.

```python
provider = make_provider("openai", "gpt-4o", api_key_env="OPENAI_API_KEY")
done = await provider.complete([SystemMessage(text="..."), UserMessage(content="hi")], tools)
```
"""

# Each module lists its public names once, in its own ``__all__``; the package's is their sum.
# Prices live in the core (`assay.pricing`, no SDK needed: the aggregator reads them too).
from assay import pricing
from assay.pricing import *  # noqa: F403

from . import (
    _anthropic,
    _anthropic_wire,
    _base,
    _dev_cache,
    _errors,
    _factory,
    _limiter,
    _models,
    _openai,
    _openai_wire,
    _prompt_cache,
    _protocol,
    _retry,
    _tracing,
    _wrapper,
)
from ._anthropic import *  # noqa: F403
from ._anthropic_wire import *  # noqa: F403
from ._base import *  # noqa: F403
from ._dev_cache import *  # noqa: F403
from ._errors import *  # noqa: F403
from ._factory import *  # noqa: F403
from ._limiter import *  # noqa: F403
from ._models import *  # noqa: F403
from ._openai import *  # noqa: F403
from ._openai_wire import *  # noqa: F403
from ._prompt_cache import *  # noqa: F403
from ._protocol import *  # noqa: F403
from ._retry import *  # noqa: F403
from ._tracing import *  # noqa: F403
from ._wrapper import *  # noqa: F403

__all__ = [
    *_anthropic.__all__,
    *_anthropic_wire.__all__,
    *_base.__all__,
    *_dev_cache.__all__,
    *_errors.__all__,
    *_factory.__all__,
    *_limiter.__all__,
    *_models.__all__,
    *_openai.__all__,
    *_openai_wire.__all__,
    *pricing.__all__,
    *_prompt_cache.__all__,
    *_protocol.__all__,
    *_retry.__all__,
    *_tracing.__all__,
    *_wrapper.__all__,
]
