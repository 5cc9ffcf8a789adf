"""The permissions derived from the services' contracts allow exactly what the
hand-written map allowed before (captured in `data/permission_map_before.json`), plus the
rights added since, each named here with its reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.config import Settings
from assay.contract import Consumer, ServiceContract, advisory_subject, fill, service_contracts
from assay.security import permission_map
from assay.security.permissions import events_by_role
from assay_schemas import ArtifactsSealed

BEFORE = json.loads((Path(__file__).parent / "data" / "permission_map_before.json").read_text())


def _variants() -> dict[str, dict[str, Any]]:
    s = Settings(instance="vm")
    return {
        "default": permission_map(s),
        "embedded": permission_map(s, publisher_campaigns=("c1",), instances=("vm",)),
        "narrowed": permission_map(
            s, publisher_campaigns=("c1", "c2"), judge_ids=("j1", "j2"), instances=("a", "b")
        ),
    }


def _matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: `*` is one whole token, a final `>` one or more."""
    p, s = pattern.split("."), subject.split(".")
    for i, token in enumerate(p):
        if token == ">":
            return len(s) > i
        if i >= len(s) or (token != "*" and token != s[i]):
            return False
    return len(p) == len(s)


ADDED = {
    "cli": (
        "assay.ev.ControlDeclared.*.*",  # `assay run` declares a campaign's control runs
        "assay.ev.JudgmentRecorded.*.*",  # reviewers' verdicts go out over the cli's connection
    ),
    # Asks the other instances whether they are alive before declaring their seals lost.
    "sandbox-manager": ("assay.rpc.sandbox-alive.*",),
    # A stopping campaign (#51): the runner cancels runs never requested, hearing the stop
    # on its own durable; the aggregator logs the stop its fold decided.
    "runner": (
        "assay.ev.RunCancelled.*.*",
        "$JS.API.CONSUMER.CREATE.ASSAY.runner-stops.>",
        "$JS.API.CONSUMER.MSG.NEXT.ASSAY.runner-stops",
        "$JS.ACK.ASSAY.runner-stops.>",
        "assay.dlq.runner-stops",
    ),
    "aggregator": ("assay.ev.CampaignStopped.*.*",),
}
"""Rights granted after the capture; any other difference is a regression."""
SERVICE_USERS = ("runner", "sandbox-manager", "judge", "aggregator", "judge-j1", "judge-j2")
ADDED_SUBSCRIBE = {"sandbox-manager": ("assay.rpc.sandbox-alive.*",)}  # answers on its own
LOST_INFO = "$JS.API.STREAM.INFO.ASSAY_LOST"
LOST_PULLS = (
    "$JS.API.CONSUMER.INFO.ASSAY_LOST.*",
    "$JS.API.CONSUMER.CREATE.ASSAY_LOST.*.>",
    "$JS.API.CONSUMER.MSG.NEXT.ASSAY_LOST.*",
    "$JS.ACK.ASSAY_LOST.*.>",
)
"""The stream that keeps JetStream's max-deliveries advisories (a run's lost last delivery
is given up by the next instance up, though none heard the advisory): every connection
looks it up, the cli creates it, and every service pulls its own durables' advisories
from it (`test_services_pull_only_their_own_durables_lost_deliveries` checks which)."""


def _added(user: str) -> tuple[str, ...]:
    if user == "admin":
        return ()
    lost = {"cli": (LOST_INFO, "$JS.API.STREAM.CREATE.ASSAY_LOST")}.get(user, (LOST_INFO,))
    pulls = LOST_PULLS if user in SERVICE_USERS else ()
    return (*ADDED.get(user, ()), *lost, *pulls)


def _not_added(rights: list[str] | tuple[str, ...], added: tuple[str, ...]) -> list[str]:
    return [r for r in rights if not any(_matches(a, r) for a in added)]


REDUNDANT = {("default", "sandbox-manager")}
"""Where the hand-written lists named a durable next to the `*` that already allowed it (the
derived lists say only `*` then): same rights, fewer lines."""


@pytest.mark.parametrize("variant", ["default", "embedded", "narrowed"])
def test_derived_map_allows_exactly_what_the_hand_written_one_did(variant: str) -> None:
    derived = _variants()[variant]
    before = BEFORE[variant]
    assert list(derived) == list(before), "same users, same order"
    for user, old in before.items():
        new = derived[user]
        assert new.allow_responses == old["allow_responses"], user
        more = ADDED_SUBSCRIBE.get(user, ())
        assert all(any(_matches(a, r) for r in new.subscribe) for a in more), user
        assert _not_added(new.subscribe, more) == old["subscribe"], user
        added = _added(user)
        assert all(any(_matches(a, p) for p in new.publish) for a in added), user
        if (variant, user) not in REDUNDANT:
            assert _not_added(new.publish, added) == old["publish"], user
            continue
        # As strict: each side's every right is allowed by the other side's rights.
        assert all(any(_matches(n, o) for n in new.publish) for o in old["publish"])
        assert set(_not_added(new.publish, added)) <= set(old["publish"])


@pytest.mark.parametrize("variant", ["default", "embedded", "narrowed"])
def test_services_pull_only_their_own_durables_lost_deliveries(variant: str) -> None:
    """The durables whose max-deliveries advisories a service user may pull name exactly
    the durables it may pull from the log, nobody subscribes to the advisories themselves,
    and the message get it needs to dead-letter one is allowed."""
    pull = "$JS.API.CONSUMER.MSG.NEXT.ASSAY."
    lost = "$JS.API.CONSUMER.MSG.NEXT.ASSAY_LOST."
    advisories = advisory_subject("ASSAY", "*")
    for user, perms in _variants()[variant].items():
        assert not any(_matches(advisories, r) for r in perms.subscribe if r != ">"), user
        if user not in SERVICE_USERS:
            assert not any(p.startswith(lost) for p in perms.publish), user
            continue
        pulled = {p.removeprefix(pull) for p in perms.publish if p.startswith(pull)}
        heard = {p.removeprefix(lost) for p in perms.publish if p.startswith(lost)}
        assert heard == pulled and heard, (user, heard, pulled)
        assert "$JS.API.STREAM.MSG.GET.ASSAY" in perms.publish, user


def test_the_schemas_writers_agree_with_the_services_contracts() -> None:
    """Signing reads who writes what from the event models; permissions from contracts."""
    by_role = events_by_role()
    assert by_role["cli"] == ("CampaignStarted", "TaskSubmitted", "RunRequested", "ControlDeclared")
    assert by_role["reviewer"] == ("JudgmentRecorded",)
    assert by_role["publisher"] == ("TaskSubmitted",)
    contracts = service_contracts().values()
    for role in {c.role for c in contracts}:
        published = {t for c in contracts if c.role == role for t in c.published_types}
        assert published == set(by_role.get(role, ())), role
    assert by_role["aggregator"] == ("CampaignStopped",)  # the stop its fold decided (#51)
    assert "admin" not in by_role


def test_every_installed_service_has_its_contract() -> None:
    from importlib.metadata import entry_points

    services = {ep.name for ep in entry_points(group="assay.services")}
    assert services == set(service_contracts())


def test_an_unfilled_placeholder_widens_one_token_only() -> None:
    assert fill("sandbox.{instance}", {}) == "sandbox.*"
    assert fill("sandbox-manager-{instance}-failed", {}) == "*"
    assert fill("judge-{judge_id}", {"judge_id": "j1"}) == "judge-j1"


def test_a_contract_refuses_unknown_placeholders_roles_and_twice_declared_durables() -> None:
    with pytest.raises(ValueError, match="placeholders"):
        Consumer("judge-{who}", ArtifactsSealed)
    with pytest.raises(ValueError, match="role"):
        ServiceContract(service="x", role="root")  # type: ignore[arg-type]
    twice = Consumer("x", ArtifactsSealed)
    with pytest.raises(ValueError, match="twice"):
        ServiceContract(service="x", role="judge", consumes=(twice, twice))
