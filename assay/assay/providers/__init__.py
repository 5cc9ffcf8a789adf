"""Talk to models: a normalized conversation, OpenAI/Anthropic providers, retries, limits, cost.

```python
provider = make_provider("openai", "gpt-4o", api_key_env="OPENAI_API_KEY")
done = await provider.complete([SystemMessage(text="..."), UserMessage(content="hi")], tools)
```
"""

from ._anthropic import AnthropicProvider
from ._anthropic_wire import (
    AnthropicPrompt,
    completion_from_anthropic,
    from_anthropic_messages,
    from_anthropic_tools,
    to_anthropic_prompt,
    to_anthropic_tools,
)
from ._base import SdkProvider
from ._errors import (
    ProviderConfigError,
    ProviderError,
    ProviderRequestError,
    ProviderTransientError,
    ProviderUnavailable,
    TransientKind,
)
from ._factory import DEFAULT_KEY_ENV, ProviderKind, ProviderSpec, make_provider, provider_for
from ._limiter import AdaptiveLimiter, LimiterKey, LimiterRegistry, Slot, default_registry
from ._models import (
    AssistantMessage,
    Completion,
    ContentPart,
    GenerationParams,
    ImageMediaType,
    ImagePart,
    Message,
    StopReason,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
    Usage,
    UserMessage,
    messages_from_json,
    messages_to_json,
)
from ._openai import OpenAIProvider
from ._openai_wire import (
    completion_from_openai,
    from_openai_messages,
    from_openai_tools,
    to_openai_messages,
    to_openai_tools,
)
from ._pricing import DEFAULT_PRICES, Price, PriceTable, cost, price_for
from ._protocol import ModelProvider
from ._retry import RetryEvent, RetryPolicy, backoff_delay, parse_retry_after

__all__ = [
    "DEFAULT_KEY_ENV",
    "DEFAULT_PRICES",
    "AdaptiveLimiter",
    "AnthropicPrompt",
    "AnthropicProvider",
    "AssistantMessage",
    "Completion",
    "ContentPart",
    "GenerationParams",
    "ImageMediaType",
    "ImagePart",
    "LimiterKey",
    "LimiterRegistry",
    "Message",
    "ModelProvider",
    "OpenAIProvider",
    "Price",
    "PriceTable",
    "ProviderConfigError",
    "ProviderError",
    "ProviderKind",
    "ProviderRequestError",
    "ProviderSpec",
    "ProviderTransientError",
    "ProviderUnavailable",
    "RetryEvent",
    "RetryPolicy",
    "SdkProvider",
    "Slot",
    "StopReason",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolDefinition",
    "ToolResultMessage",
    "TransientKind",
    "Usage",
    "UserMessage",
    "backoff_delay",
    "completion_from_anthropic",
    "completion_from_openai",
    "cost",
    "default_registry",
    "from_anthropic_messages",
    "from_anthropic_tools",
    "from_openai_messages",
    "from_openai_tools",
    "make_provider",
    "messages_from_json",
    "messages_to_json",
    "parse_retry_after",
    "price_for",
    "provider_for",
    "to_anthropic_prompt",
    "to_anthropic_tools",
    "to_openai_messages",
    "to_openai_tools",
]
