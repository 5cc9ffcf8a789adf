"""Web tools run in the runner (never in the sandbox) through a pluggable provider.

`OfflineWeb` is the default; `CampaignWeb` serves a campaign's `web:` section: search
engines (`_search`), pages read as text (`_read`), every hop through the SSRF guard
(`_guard`, `_http`), every answer kept and replayable (`_cache`).
"""

from . import _cache, _campaign, _guard, _http, _protocol, _read, _search
from ._cache import *  # noqa: F403
from ._campaign import *  # noqa: F403
from ._guard import *  # noqa: F403
from ._http import *  # noqa: F403
from ._protocol import *  # noqa: F403
from ._read import *  # noqa: F403
from ._search import *  # noqa: F403

__all__ = [
    *_cache.__all__,
    *_campaign.__all__,
    *_guard.__all__,
    *_http.__all__,
    *_protocol.__all__,
    *_read.__all__,
    *_search.__all__,
]
