"""Names of the JetStream object store buckets outside systems upload into.

A leaf: the store that opens a bucket and the permissions that grant it share the name
without importing each other (the permissions sit below the bus, the uploads above it).
"""

from __future__ import annotations

__all__ = ["upload_bucket_name"]


def upload_bucket_name(stream: str, campaign_id: str) -> str:
    """The upload bucket of a campaign on the event stream `stream` (its JetStream stream
    is `OBJ_<bucket>`; its subjects are `$O.<bucket>.C.*` and `$O.<bucket>.M.*`)."""
    return f"{stream}_UP_{campaign_id}"
