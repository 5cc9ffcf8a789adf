"""The scale rows (bench.scale_rows) from a measured result: what the table says about a run."""

from __future__ import annotations

import os

from bench.model_floor import ModelFloor
from bench.procs import Sampler, machine_busy_s
from bench.scale_rows import _rows
from bench.scale_run import Size, _Result


def _result(cpu: dict[str, float], go_procs: int) -> _Result:
    sampler = Sampler({}, 0)
    sampler.sys_s = {"nats-server": 1.0}
    sampler.sandbox_rss = sampler.sandbox_pss = [2.5]
    sampler.machine_s = 44.0
    return _Result(
        wall_s=30.0,
        sealed=10,
        failed=0,
        steps=110,
        cpu=cpu,
        sampler=sampler,
        nats_rss=20.0,
        events_per_s=100.0,
        max_lag=3,
        traffic={},
        go_procs=go_procs,
        first_wave_s=2.5,
    )


def test_the_least_wall_is_the_platforms_cpu_over_the_cores_and_the_server_shows_its_procs() -> (
    None
):
    cpu = {"runner": 30.0, "sandbox-manager": 14.0, "nats-server": 6.0}
    floor = ModelFloor(1.0, 1.5)
    rows = _rows(Size(10, 10, 10), _result(cpu, go_procs=1), floor, floor)
    by_figure = {row.name: row for row in rows}
    cores = len(os.sched_getaffinity(0))
    (least,) = [r for f, r in by_figure.items() if f.startswith("  the least wall the platform's")]
    assert f"on {cores} cores" in least.name
    assert least.value == 50.0 / cores
    assert least.baseline == Size(10, 10, 10).ideal_s
    (server,) = [r for f, r in by_figure.items() if f.startswith("    nats-server")]
    assert "(GOMAXPROCS 1)" in server.name
    assert "(in the kernel: 9.09)" in server.name  # 1 s over 110 steps, in ms
    assert server.value == 6.0 / 110 * 1000
    (wave,) = [r for f, r in by_figure.items() if f.startswith("  the first wave's 10 runs")]
    assert wave.value == 2.5 and wave.baseline == 1.0  # against one model call
    (machine,) = [r for f, r in by_figure.items() if f.startswith("  the least wall the whole")]
    assert machine.value == 44.0 / cores and machine.baseline == 30.0  # against the wall


def test_the_machines_busy_cpu_counts_user_nice_system_irq_softirq_only() -> None:
    hz = os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal guest guest_nice
    text = "cpu  100 20 30 5000 70 4 6 900 0 0\ncpu0 50 10 15 2500 35 2 3 450 0 0\n"
    assert machine_busy_s(text) == (100 + 20 + 30 + 4 + 6) / hz
    assert machine_busy_s() > 0  # this machine's own, read from /proc/stat
