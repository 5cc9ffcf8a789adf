"""An ASGI app (the viewer, the review desk) served by uvicorn on a free loopback port."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn


@asynccontextmanager
async def serve(app: Any) -> AsyncIterator[str]:
    """`app` served by uvicorn on a free loopback port; its base URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            timeout_graceful_shutdown=2,  # event streams a browser left open close, not hang
        )
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        try:
            await asyncio.wait_for(task, 15)
        except TimeoutError:
            server.force_exit = True
            task.cancel()
