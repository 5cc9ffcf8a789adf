"""A scripted model server speaking the OpenAI and Anthropic HTTP APIs on loopback.

Tests and the default demo drive the real SDKs against it: each model name is answered by
a script (a Python callable over the normalized conversation), and faults (429, 5xx,
timeouts, malformed bodies, dead endpoints) can be injected per model.
"""

from ._cache import PromptCache, TooManyBreakpoints
from ._faults import Fault, FaultKind, MalformedBody
from ._records import RecordedRequest
from ._script import (
    Script,
    ScriptedSequence,
    ScriptedToolCall,
    ScriptExhausted,
    ScriptReply,
    ScriptRequest,
    echo,
    estimate_usage,
)
from ._server import ScriptedModelServer, ScriptedServerNotStarted
from ._wire import call_id

__all__ = [
    "Fault",
    "FaultKind",
    "MalformedBody",
    "PromptCache",
    "RecordedRequest",
    "Script",
    "ScriptExhausted",
    "ScriptReply",
    "ScriptRequest",
    "ScriptedModelServer",
    "ScriptedSequence",
    "ScriptedServerNotStarted",
    "ScriptedToolCall",
    "TooManyBreakpoints",
    "call_id",
    "echo",
    "estimate_usage",
]
