"""A message delivered from the stream is never a NATS status message.

The NATS protocol carries a status (100 heartbeat or flow control, 404/408/409 from a
pull, 503 no responders) in the header line (`NATS/1.0 100 Idle Heartbeat`), and nats-py
files it under the `Status` and `Description` headers, the same names a publisher may
give headers of its own. The server stores a publisher's header block as it came, header
line included, so a message on any subject a publisher may write, with an empty body and
such a status, was taken by nats-py, once delivered from the stream, for a control
message: a replay waited for messages that never came (a timeout) and a durable consumer
dropped it without an ack, so it came back for ever. No stored message may stop a reader
of the log, so before nats-py reads the headers of a message delivered from the stream (its
reply subject is an ack subject, which no control message has), a status in its header
line and its own `Status` and `Description` headers are renamed `Assay-Stored-…`: the
message reaches our readers, undecodable or not, as any other. The server stores header
blocks nats-py cannot parse at all (`NATS/1.0` alone raised in its read loop, and the
replay waited for ever), so a block that does not start with the header line is made
into one that does.

nats-py offers no hook for this: the one method it parses messages in is wrapped here, on
import of `assay.bus`, and checked to still have the signature this was written for.
"""

from __future__ import annotations

import inspect
from typing import Any

from nats.aio.client import Client

__all__ = ["as_stored"]

_LINE = b"NATS/1.0"
_HEAD = _LINE + b"\r\n"
_ACK = b"$JS.ACK."
_RENAMED = b"Assay-Stored-"
_STATUS_KEYS = (b"status", b"description")


def as_stored(block: bytes) -> bytes:
    """A stored message's header block, well formed and with nothing nats-py would read
    as a status (a block of 8 bytes or fewer made its parser raise in the read loop)."""
    lower = block.lower()
    if block.startswith(_HEAD) and b"\nstatus" not in lower and b"\ndescription" not in lower:
        return block  # nearly every message: nothing to rename
    lines = bytes(block).split(b"\r\n")
    first = lines[0]
    status_line = (first[len(_LINE) :] if first.startswith(_LINE) else first).strip()
    out = [_LINE]
    if status_line:
        out.append(_RENAMED + b"Status-Line: " + status_line)
    for line in lines[1:]:
        key, colon, _ = line.partition(b":")
        if colon and key.strip().lower() in _STATUS_KEYS:
            line = _RENAMED + line.lstrip()
        if line:
            out.append(line)
    return b"\r\n".join(out) + b"\r\n\r\n"


_EXPECTED = ["self", "sid", "subject", "reply", "data", "headers"]
_parse = Client._process_msg
if list(inspect.signature(_parse).parameters) != _EXPECTED:
    raise ImportError(
        "nats-py's Client._process_msg changed: assay.bus._stored must be checked against "
        "it before stored messages can be read safely"
    )


async def _process_msg(
    self: Client, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes
) -> Any:
    if headers and reply[: len(_ACK)] == _ACK:
        headers = as_stored(headers)
    return await _parse(self, sid, subject, reply, data, headers)


if getattr(Client._process_msg, "__module__", "") != __name__:
    Client._process_msg = _process_msg  # type: ignore[method-assign]
