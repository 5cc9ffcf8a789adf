"""`assay run --cache [--cache-ttl TTL]`: the flag turns the development cache on over the
campaign file, a bad expiry is refused before anything starts, and without it the
campaign's own ``cache:`` (or none) stands."""

from __future__ import annotations

from datetime import timedelta

import pytest

from assay_cli.run import with_cache
from assay_schemas import DEFAULT_CACHE_TTL, CacheSpec, CampaignSpec, ConfigError

PLAIN = CampaignSpec.model_validate(
    {"campaign_id": "c", "agents": [{"agent_id": "a", "model": "m"}]}
)
OWN = PLAIN.model_copy(update={"cache": CacheSpec(ttl=timedelta(hours=3))})


def test_without_the_flag_the_campaign_decides() -> None:
    assert with_cache(PLAIN, None).cache is None
    assert with_cache(OWN, None) == OWN


def test_the_flag_turns_the_cache_on_with_the_campaigns_or_the_default_expiry() -> None:
    on = with_cache(PLAIN, "").cache
    assert on is not None and on.ttl == DEFAULT_CACHE_TTL
    assert with_cache(OWN, "") == OWN
    ttl = with_cache(OWN, "30m").cache
    assert ttl is not None and ttl.ttl == timedelta(minutes=30)


@pytest.mark.parametrize("bad", ["0s", "-3d", "soon", "9999d"])
def test_a_bad_expiry_is_refused_naming_the_option(bad: str) -> None:
    with pytest.raises(ConfigError, match="--cache-ttl"):
        with_cache(PLAIN, bad)
