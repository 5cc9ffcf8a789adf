"""Assay's contracts: events, domain models, the rubric and the error tree.

Other systems can publish valid events without Python using the JSON Schemas exported
next to this package (`assay schemas export`).
"""

# Each module lists its public names once, in its own ``__all__``; the package's is their sum.
from . import (
    _cache,
    _campaign_history,
    _codec,
    _controls,
    _domain,
    _envelope,
    _errors,
    _events,
    _export,
    _files,
    _history,
    _ids,
    _lifecycle,
    _problems,
    _review,
    _rpc,
    _rubric,
    _rules,
    _steps,
    _stopping,
    _web,
)
from ._cache import *  # noqa: F403
from ._campaign_history import *  # noqa: F403
from ._codec import *  # noqa: F403
from ._controls import *  # noqa: F403
from ._domain import *  # noqa: F403
from ._envelope import *  # noqa: F403
from ._errors import *  # noqa: F403
from ._events import *  # noqa: F403
from ._export import *  # noqa: F403
from ._files import *  # noqa: F403
from ._history import *  # noqa: F403
from ._ids import *  # noqa: F403
from ._lifecycle import *  # noqa: F403
from ._problems import *  # noqa: F403
from ._review import *  # noqa: F403
from ._rpc import *  # noqa: F403
from ._rubric import *  # noqa: F403
from ._rules import *  # noqa: F403
from ._steps import *  # noqa: F403
from ._stopping import *  # noqa: F403
from ._web import *  # noqa: F403

__all__ = [
    *_campaign_history.__all__,
    *_codec.__all__,
    *_controls.__all__,
    *_domain.__all__,
    *_envelope.__all__,
    *_errors.__all__,
    *_events.__all__,
    *_export.__all__,
    *_files.__all__,
    *_history.__all__,
    *_ids.__all__,
    *_lifecycle.__all__,
    *_problems.__all__,
    *_review.__all__,
    *_rpc.__all__,
    *_rubric.__all__,
    *_rules.__all__,
    *_steps.__all__,
    *_cache.__all__,
    *_stopping.__all__,
    *_web.__all__,
]
