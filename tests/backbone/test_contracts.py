"""Each service subscribes exactly what its contract declares: the contract is the wiring."""

from __future__ import annotations

from pathlib import Path

from assay.config import Settings
from assay.contract import fill, service_contracts
from assay.service import Service
from assay.store import open_store
from assay_aggregator.service import build as build_aggregator
from assay_judge import build, build_jury, build_rules
from assay_runner.service import build as build_runner
from assay_sandbox_manager.service import build as build_sandbox
from assay_schemas import JudgeSpec


def test_each_service_registers_the_durables_its_contract_declares(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, state_dir=tmp_path / "state", instance="vm")
    store = open_store(settings)
    built: dict[str, Service] = {
        "runner": build_runner(settings, store=store),
        "sandbox-manager": build_sandbox(settings, store=store, backends={}),
        "aggregator": build_aggregator(settings, store=store),
        "rules": build_rules(settings, store=store),
        "jury": build_jury(settings, store=store),
        "judge": build(settings, JudgeSpec(judge_id="j1", model="m"), store=store),
    }
    assert set(built) == set(service_contracts())
    values = {"instance": "vm", "judge_id": "j1"}
    for name, service in built.items():
        contract = service_contracts()[name]
        durables = service.bus._durables  # type: ignore[attr-defined]
        assert durables == [fill(c.durable, values) for c in contract.consumes], name
