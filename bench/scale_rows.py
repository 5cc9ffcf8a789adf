"""Scale rows: what the table says about one measured size, and Inspect AI beside it."""

from __future__ import annotations

import os

from bench.model_floor import ModelFloor
from bench.scale_run import Size, _Result
from bench.table import Row, breaches_row, percentile

__all__: list[str] = []


def _rows(size: Size, r: _Result, before: ModelFloor, after: ModelFloor) -> list[Row]:
    g = "scale"
    floor = ModelFloor.mean(before, after)
    what = f"{size.runs} × {size.steps} `bash true`, concurrency {size.concurrency}, "
    what += f"model latency {size.latency_s:g} s, bubblewrap"
    unfinished = max(0, size.runs - r.sealed - r.failed)
    cpu_s = sum(r.cpu.values())
    per_step = cpu_s / max(1, r.steps) * 1000
    cores = len(os.sched_getaffinity(0))
    rows = [
        Row(
            g,
            f"Assay, {what}: wall",
            r.wall_s,
            "s",
            size.ideal_s,
            "ideal (model time)",
            "≤ 1.25× ideal",
        ),
        # The wall cannot be shorter than the platform's own CPU spread over every core:
        # on a small machine that, not the model, bounds it (the model server's CPU and the
        # agents' commands come on top).
        Row(
            g,
            f"  the least wall the platform's CPU allows on {cores} cores (its CPU / cores)",
            cpu_s / cores,
            "s",
            size.ideal_s,
            "ideal (model time)",
        ),
        # What else shares the cores here (the scripted model server, the agents' commands,
        # this bench) is not the platform's CPU, but the wall cannot beat it either.
        Row(
            g,
            "  the least wall the whole machine's busy CPU allows (the platform's, the model "
            "server's, the agents' commands', the bench's, / cores; near 1× the wall: the "
            "machine's CPU is what bounds it)",
            r.sampler.machine_s / cores,
            "s",
            r.wall_s,
            "the wall",
        ),
        # Runs start as their tasks are admitted: a slow door delays the whole wave.
        Row(
            g,
            f"  the first wave's {min(size.runs, size.concurrency)} runs requested "
            "(their tasks admitted), after the submission began",
            r.first_wave_s,
            "s",
            size.latency_s,
            "one model call",
        ),
        Row(
            g,
            f"  runs failed ({unfinished} more unfinished)",
            float(r.failed + unfinished),
            "runs",
            target="0",
        ),
        breaches_row(
            g, "  the log's invariants broken once the runs ended (`assay check`)", r.breaches
        ),
        Row(
            g,
            "  agent steps logged (tool steps + submit)",
            float(r.steps),
            "steps",
            float(size.runs * (size.steps + 1)),
            "expected",
        ),
        Row(
            g,
            "  CPU per agent step: Assay processes + nats-server + sandboxes' bwrap and resident",
            per_step,
            "ms",
            target="≤ 4 ms",
        ),
    ]
    for part, seconds in r.cpu.items():
        kernel = r.sampler.sys_s.get(part)
        of_which = f" (in the kernel: {kernel / max(1, r.steps) * 1000:.2f})" if kernel else ""
        if part == "nats-server":
            of_which += f" (GOMAXPROCS {r.go_procs})"
        rows.append(Row(g, f"    {part}{of_which}", seconds / max(1, r.steps) * 1000, "ms/step"))
    rows += [
        Row(
            g,
            "  floor: one model call through the runner's provider (OpenAI SDK), alone; "
            "mean of before and after the run",
            floor.provider_ms,
            "ms/call",
            floor.sdk_create_ms,
            "the SDK's create()",
        ),
        # This VM's speed moved 2x within an hour (the floor 1.1 to 2.1 ms), and every CPU
        # figure with it; their ratio to the floor stayed within 5.4-6.1 (docs/scale.md).
        Row(
            g,
            "  CPU per agent step in floors (the host's speed cancels out)",
            per_step,
            "ms",
            floor.provider_ms,
            "the floor",
        ),
        Row(
            g,
            "  the floor after the run against before it (far from 1: the host's speed "
            "moved during the run, and the floors above are that uncertain)",
            after.provider_ms,
            "ms/call",
            before.provider_ms,
            "before",
            "≈ 1",
        ),
    ]
    s = r.sampler
    rows += [
        Row(
            g,
            f"  RSS per live sandbox p50 (bwrap + resident; {s.peak_live} live)",
            percentile(s.sandbox_rss, 50),
            "MiB",
            percentile(s.sandbox_rss, 100),
            "max",
            "≤ 10 MB",
        ),
        Row(
            g,
            "  PSS per live sandbox p50 (shared pages split)",
            percentile(s.sandbox_pss, 50),
            "MiB",
        ),
    ]
    for label, mb in s.service_rss.items():
        rows.append(Row(g, f"  peak RSS {label}", mb, "MiB", target="< 1 GiB"))
    rows += [
        Row(g, "  events/s through the aggregator while live", r.events_per_s, "events/s"),
        Row(g, "  aggregator's max pending (lag)", float(r.max_lag), "msgs"),
    ]
    return rows + _traffic_rows(r.traffic)


def _traffic_rows(traffic: dict[str, tuple[float, float]]) -> list[Row]:
    """Messages per step through nats-server: the hops a step costs, in all and by service."""
    g = "scale"
    total = sum(p + d for p, d in traffic.values())
    rows = [
        Row(
            g,
            "  messages through nats-server per agent step (each service's connection: "
            "published + delivered to it)",
            total,
            "msgs/step",
        )
    ]
    for name, (published, delivered) in traffic.items():
        label = f"    {name.removeprefix('assay-')} (published {published:.2f}, delivered {delivered:.2f})"
        rows.append(Row(g, label, published + delivered, "msgs/step"))
    return rows


def _peer_rows(
    size: Size, assay_wall_s: float, inspect: tuple[float, int, str] | None
) -> list[Row]:
    g = "scale"
    what = f"{size.runs} × {size.steps} `bash true`, concurrency {size.concurrency}, "
    what += f"model latency {size.latency_s:g} s, local sandbox"
    if inspect is None:
        return [
            Row(
                g,
                f"Inspect AI, {what}: did not finish within its timeout",
                float("nan"),
                "s",
                target="Assay ahead",
            )
        ]
    wall, failed, version = inspect
    return [
        Row(
            g, f"Inspect AI {version}, {what}: wall", wall, "s", size.ideal_s, "ideal (model time)"
        ),
        Row(
            g,
            "  Assay's wall against Inspect AI's",
            assay_wall_s,
            "s",
            wall,
            "Inspect AI's wall",
            "< 1× Inspect AI",
        ),
        Row(g, "  Inspect AI runs failed", float(failed), "runs"),
    ]
