"""Checking history by hash chain: as strict as checking every signature, with fewer checks.

Each attack is judged twice: by `verify_history` (one signature per linked run) and by
`TrustList.verify` on every message alone. Both must give every message the same verdict
and reason; the chain only saves work.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.bus import RawMessage, Subjects
from assay.config import Settings
from assay.security.chain import parse_link, verify_history
from assay.security.signing import (
    CHAIN,
    SIGNATURE,
    SignatureCheck,
    Signer,
    TrustList,
    ensure_operator,
    signed_bytes,
    signer_for,
    trust_for,
)
from assay_schemas import Event, parse_event
from assay_testing.synthetic_log import LogSpec, synthetic_events, writer_of

SPEC = LogSpec(campaign_id="c1", n_tasks=3, n_agents=2, steps_per_run=3)


@pytest.fixture
def home(tmp_path: Path) -> Settings:
    settings = Settings(home=tmp_path / "home")
    ensure_operator(settings)
    return settings


@pytest.fixture
def trust(home: Settings) -> TrustList:
    trust = trust_for(home)
    assert trust is not None
    return trust


def _log(home: Settings, *, chained: bool = True) -> list[RawMessage]:
    """A small campaign, each event signed by the service that writes it, in log order."""
    subjects = Subjects(prefix="assay")
    signers: dict[str, Signer] = {}
    out: list[RawMessage] = []
    for seq, event in enumerate(synthetic_events(SPEC), start=1):
        service = writer_of(event)
        if service not in signers:
            signer = signer_for(home, service)
            assert signer is not None
            signers[service] = signer
        subject, data = subjects.of(event), event.model_dump_json().encode()
        if chained:
            headers = signers[service].headers(subject, data)
        else:  # as services signed before chains: `<subject>\n<bytes>`, no link
            headers = {
                k: v
                for k, v in signers[service].headers(subject, data).items()
                if k not in (CHAIN, SIGNATURE)
            }
            signature = signers[service].keypair.sign(signed_bytes(subject, data))
            headers[SIGNATURE] = _b64(bytes(signature))
        out.append(RawMessage(seq, subject, data, headers))
    return out


def _b64(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _events(log: list[RawMessage]) -> list[tuple[RawMessage, Event]]:
    return [(m, parse_event(m.data, subject=m.subject)) for m in log]


class Counted:
    """Counts the Ed25519 checks a trust list makes."""

    def __init__(self, trust: TrustList, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        holds = trust.signature_holds

        def counted(*args: object) -> bool:
            self.n += 1
            return holds(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(trust, "signature_holds", counted)


def _judged(trust: TrustList, log: list[RawMessage]) -> list[SignatureCheck]:
    """The chain's verdicts, checked against those of every message on its own."""
    batch = _events(log)
    by_chain = verify_history(trust, batch)
    alone = [trust.verify(m.subject, m.data, m.headers, e) for m, e in batch]
    assert by_chain == alone
    return by_chain


def _refused(verdicts: list[SignatureCheck]) -> list[tuple[int, str]]:
    return [(i, v.reason) for i, v in enumerate(verdicts) if not v.ok]


def _with(message: RawMessage, **changes: Any) -> RawMessage:
    return message._replace(**changes)


def _scores_up(data: bytes) -> bytes:
    body = json.loads(data)
    for dimension in body.get("scores", {}).values():
        dimension["score"] = 10
    body["cost_usd"] = 0.0
    return json.dumps(body).encode()


def _verdict_at(log: list[RawMessage], judge: str = "judge_a") -> int:
    return next(
        i
        for i, m in enumerate(log)
        if f'"judge_id":"{judge}"' in m.data.decode()
        and "JudgmentRecorded" in m.subject
        and 0 < i < len(log) - 1
    )


def test_a_whole_log_is_accepted_with_one_check_per_chain(
    home: Settings, trust: TrustList, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _log(home)
    counted = Counted(trust, monkeypatch)
    verdicts = verify_history(trust, _events(log))
    assert all(v.ok for v in verdicts)
    chains = {parse_link(m.headers[CHAIN]).chain_id for m in log}  # type: ignore[union-attr]
    assert counted.n == len(chains) < len(log) / 5
    assert _judged(trust, log) == verdicts


def test_an_altered_event_inside_a_linked_run_is_refused(home: Settings, trust: TrustList) -> None:
    log = _log(home)
    i = _verdict_at(log)
    log[i] = _with(log[i], data=_scores_up(log[i].data))
    assert _refused(_judged(trust, log)) == [(i, "bad signature by judge/judge_a")]


def test_a_forged_event_with_a_repeated_index_is_refused_the_genuine_one_counts(
    home: Settings, trust: TrustList
) -> None:
    """The genuine verdict's chain header (and signature) on altered scores, stored right
    after it, before it, or alone in the batch without it."""
    log = _log(home)
    i = _verdict_at(log)
    forged = _with(log[i], data=_scores_up(log[i].data))
    after = [*log[: i + 1], forged, *log[i + 1 :]]
    assert _refused(_judged(trust, after)) == [(i + 1, "bad signature by judge/judge_a")]
    before = [*log[:i], forged, *log[i:]]
    assert _refused(_judged(trust, before)) == [(i, "bad signature by judge/judge_a")]
    instead = [*log[:i], forged, *log[i + 1 :]]
    assert _refused(_judged(trust, instead)) == [(i, "bad signature by judge/judge_a")]


def test_a_forged_event_linked_to_a_genuine_one_is_refused(
    home: Settings, trust: TrustList
) -> None:
    """A forger who copies the chain and the right digest still cannot sign: the forged
    event is refused, the genuine ones it links to still count."""
    from assay.security.chain import _digest

    log = _log(home)
    last = max(i for i, m in enumerate(log) if '"judge_id":"judge_a"' in m.data.decode())
    link = parse_link(log[last].headers[CHAIN])
    assert link is not None
    header = f"{link.chain_id}.{link.number + 1}.{_digest(log[last])}"
    forged = _with(
        log[last],
        sequence=len(log) + 1,
        data=_scores_up(log[last].data),
        headers={**log[last].headers, CHAIN: header},
    )
    assert _refused(_judged(trust, [*log, forged])) == [
        (len(log), "bad signature by judge/judge_a")
    ]


def test_a_link_signed_by_another_key_vouches_for_nothing(home: Settings, trust: TrustList) -> None:
    """A forged verdict in a judge's name, then an event the runner really signs whose link
    names the forgery's digest in the judge's chain: runs never mix keys, so the runner's
    signature vouches for nothing of the judge's."""
    from assay.security.chain import _digest

    log = _log(home)
    last = max(i for i, m in enumerate(log) if '"judge_id":"judge_a"' in m.data.decode())
    link = parse_link(log[last].headers[CHAIN])
    assert link is not None
    forged = _with(
        log[last],
        sequence=len(log) + 1,
        data=_scores_up(log[last].data),
        headers={
            **log[last].headers,
            CHAIN: f"{link.chain_id}.{link.number + 1}.{_digest(log[last])}",
        },
    )
    step = next(m for m in log if "AgentStepLogged" in m.subject)
    runner = signer_for(home, "runner")
    assert runner is not None
    header = f"{link.chain_id}.{link.number + 2}.{_digest(forged)}"
    signature = runner.keypair.sign(signed_bytes(step.subject, step.data, header))
    signed = {
        **runner.headers(step.subject, step.data),
        CHAIN: header,
        SIGNATURE: _b64(bytes(signature)),
    }
    vouching = _with(step, sequence=len(log) + 2, headers=signed)
    verdicts = _judged(trust, [*log, forged, vouching])
    assert _refused(verdicts) == [(len(log), "bad signature by judge/judge_a")]
    assert verdicts[-1].ok


def test_an_event_moved_to_another_subject_is_refused(home: Settings, trust: TrustList) -> None:
    log = _log(home)
    i = _verdict_at(log)
    # The body must match the subject's type, campaign and run (or it is not decoded at
    # all); what is left to move it to is another deployment's subjects.
    log[i] = _with(log[i], subject="elsewhere" + log[i].subject.removeprefix("assay"))
    assert _refused(_judged(trust, log)) == [(i, "bad signature by judge/judge_a")]


@pytest.mark.parametrize(
    "tamper",
    ["signature", "chain header", "no chain header", "other chain", "unsigned", "other key"],
)
def test_a_tampered_header_is_refused_as_when_each_event_is_checked(
    home: Settings, trust: TrustList, tamper: str
) -> None:
    log = _log(home)
    i = _verdict_at(log)
    headers = dict(log[i].headers)
    if tamper == "signature":
        headers[SIGNATURE] = headers[SIGNATURE][::-1]
    elif tamper == "chain header":
        chain_id, number, previous = headers[CHAIN].split(".")
        headers[CHAIN] = f"{chain_id}.{int(number) + 1}.{previous}"
    elif tamper == "no chain header":
        del headers[CHAIN]
    elif tamper == "other chain":
        headers[CHAIN] = "x" + headers[CHAIN]
    elif tamper == "unsigned":
        headers = {}
    else:
        other = signer_for(home, "judge-judge_b")
        assert other is not None
        headers = {**other.headers(log[i].subject, log[i].data), CHAIN: headers[CHAIN]}
    log[i] = _with(log[i], headers=headers)
    [(at, _)] = _refused(_judged(trust, log))
    assert at == i


def test_a_log_signed_before_chains_still_verifies(
    home: Settings, trust: TrustList, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _log(home, chained=False)
    assert not any(CHAIN in m.headers for m in log)
    counted = Counted(trust, monkeypatch)
    verdicts = verify_history(trust, _events(log))
    assert all(v.ok for v in verdicts) and counted.n == len(log)  # each message alone
    assert _judged(trust, log) == verdicts
    i = _verdict_at(log)
    log[i] = _with(log[i], data=_scores_up(log[i].data))
    assert _refused(_judged(trust, log)) == [(i, "bad signature by judge/judge_a")]


def test_gaps_and_reordering_only_cost_checks(home: Settings, trust: TrustList) -> None:
    """A chain read with holes (another subject's events, a lost publish) or out of order
    (concurrent publishes) is still accepted whole."""
    log = _log(home)
    holes = [m for i, m in enumerate(log) if i % 3]
    assert all(v.ok for v in _judged(trust, holes))
    assert all(v.ok for v in _judged(trust, list(reversed(log))))


def test_each_signer_is_a_chain_of_its_own(home: Settings) -> None:
    first, again = signer_for(home, "runner"), signer_for(home, "runner")
    assert first is not None and again is not None
    links = [parse_link(s.headers("s", b"x")[CHAIN]) for s in (first, first, again)]
    a, b, c = links
    assert a is not None and b is not None and c is not None
    assert (a.chain_id, a.number, a.previous) == (b.chain_id, 0, "") and b.number == 1
    assert b.previous and c.chain_id != a.chain_id and c.number == 0
