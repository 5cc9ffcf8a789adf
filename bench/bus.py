"""Bus rows: publish-with-ack, consume and replay through Assay vs raw nats-py."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from nats.js.api import AckPolicy, ConsumerConfig

from assay.bus import Bus, Delivery, read_raw
from assay.config import Settings
from assay.embedded import NatsServer
from assay_schemas import AgentStepLogged, Event, Producer, ToolCallRecord, Usage

from .table import Row

__all__ = ["bench_bus"]

PRODUCER = Producer(service="bench", version="0")


def _events(n: int, run: str, campaign: str = "bench") -> list[AgentStepLogged]:
    call = ToolCallRecord(call_id="c", name="bash", arguments='{"cmd": "python3 analysis.py"}')
    return [
        AgentStepLogged(
            event_id=AgentStepLogged.id_for(campaign, run, i),
            campaign_id=campaign,
            run_id=run,
            step=i,
            model_output="Running the analysis now." * 4,
            tool_calls=[call],
            usage=Usage(input_tokens=1200, output_tokens=80),
            producer=PRODUCER,
        )
        for i in range(n)
    ]


async def _publish_rates(bus: Bus, n: int, rounds: int = 5) -> tuple[float, float]:
    """Alternate rounds of ours and raw, so machine noise hits both alike; median rates."""
    for ev in _events(200, "warmup"):  # connection and stream warm-up, counted for neither
        await bus.publish(ev)
    js = bus.js
    size = n // rounds
    ours_rates, raw_rates = [], []
    for r in range(rounds):
        events = _events(size, f"r{r}", "ours")
        t0 = time.perf_counter()
        for ev in events:
            await bus.publish(ev)
        ours_rates.append(size / (time.perf_counter() - t0))
        raw = [
            (bus.subjects.of(e), e.model_dump_json().encode(), e.event_id)
            for e in _events(size, f"r{r}", "raw")
        ]
        t0 = time.perf_counter()
        for subject, data, msg_id in raw:
            await js.publish(subject, data, stream=bus.stream.name, headers={"Nats-Msg-Id": msg_id})
        raw_rates.append(size / (time.perf_counter() - t0))
    return statistics.median(ours_rates), statistics.median(raw_rates)


async def _consume_ours(settings: Settings, n: int, durable: str) -> float:
    """Events/s through `Bus.consume` (16 workers) from a fresh durable's first pull to
    its `n`th handled event (the connection made before: a one-time cost)."""
    done = asyncio.Event()
    count = 0

    async def handle(event: Event, delivery: Delivery) -> None:
        nonlocal count
        count += 1
        if count >= n:
            done.set()

    consumer = Bus(settings, service="bench-consumer")
    consumer.consume(
        consumer.subjects.event("AgentStepLogged", "ours", "*"),
        handle,
        durable=durable,
        max_workers=16,
    )
    await consumer.connect()
    t0 = time.perf_counter()
    await consumer.start()
    await asyncio.wait_for(done.wait(), 120)
    rate = n / (time.perf_counter() - t0)
    await consumer.stop()
    return rate


async def _consume_raw(bus: Bus, n: int, durable: str) -> float:
    """Events/s of nats-py's bare pull loop: fetch 16, ack each, no parsing."""
    psub = await bus.js.pull_subscribe(
        bus.subjects.event("AgentStepLogged", "raw", "*"),
        durable=durable,
        stream=bus.stream.name,
        config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT),
    )
    t0 = time.perf_counter()
    got = 0
    while got < n:
        for m in await psub.fetch(16, timeout=5):
            await m.ack()
            got += 1
    rate = n / (time.perf_counter() - t0)
    await psub.unsubscribe()
    return rate


async def _consume_rates(
    settings: Settings, bus: Bus, n: int, rounds: int = 5
) -> tuple[float, float]:
    """Alternate rounds of ours and raw, each from a fresh durable, so machine noise hits
    both alike; median rates."""
    ours_rates, raw_rates = [], []
    for r in range(rounds):
        ours_rates.append(await _consume_ours(settings, n, f"bench{r}"))
        raw_rates.append(await _consume_raw(bus, n, f"rawbench{r}"))
    return statistics.median(ours_rates), statistics.median(raw_rates)


async def _replay_rates(bus: Bus, rounds: int = 3) -> dict[str, float]:
    """Median events/s of the typed replay and the raw read, two ways each: every event
    taken and let go, as every reader of the log takes them (a fold, `assay events`, the
    services' history reads), and all of them kept in a list. Kept, the typed events are
    what Python's cycle collector walks again and again as the list grows (the raw
    messages are few objects each), a cost of keeping a whole log as objects rather than
    of reading it."""
    rates: dict[str, list[float]] = {"typed": [], "raw": [], "typed kept": [], "raw kept": []}
    total = 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        total = 0
        async for _event in bus.replay():
            total += 1
        rates["typed"].append(total / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        n = 0
        async for _msg in read_raw(bus.js, bus.stream.name, subject=bus.subjects.events):
            n += 1
        rates["raw"].append(n / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        typed = [e async for e in bus.replay()]
        rates["typed kept"].append(len(typed) / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        raw = [m async for m in read_raw(bus.js, bus.stream.name, subject=bus.subjects.events)]
        rates["raw kept"].append(len(raw) / (time.perf_counter() - t0))
        del typed, raw
    return {"total": float(total), **{k: statistics.median(v) for k, v in rates.items()}}


async def _run(n: int) -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp, NatsServer(Path(tmp) / "nats") as server:
        settings = Settings(nats_url=server.url, home=Path(tmp))
        async with Bus(settings, service="bench") as bus:
            pub, pub_raw = await _publish_rates(bus, n)
            con, con_raw = await _consume_rates(settings, bus, n)
            replay = await _replay_rates(bus)
    return [
        Row(
            "bus",
            "publish with PubAck (sequential)",
            pub,
            "events/s",
            pub_raw,
            "raw nats-py",
            "≥ 0.50× raw",
        ),
        Row(
            "bus",
            "consume + explicit ack (16 workers)",
            con,
            "events/s",
            con_raw,
            "raw pull fetch",
            "≥ 0.50× raw",
        ),
        Row(
            "bus",
            f"typed replay of {replay['total']:.0f} events, each let go (as readers take them)",
            replay["typed"],
            "events/s",
            replay["raw"],
            "raw ordered read",
            "≥ 0.50× raw",
        ),
        Row(
            "bus",
            "  the same kept in a list (the cycle collector walks what is kept)",
            replay["typed kept"],
            "events/s",
            replay["raw kept"],
            "raw messages kept",
        ),
    ]


def bench_bus(n: int = 5000) -> list[Row]:
    """Throughput of the bus layer against raw nats-py on the same server, same run."""
    return asyncio.run(_run(n))
