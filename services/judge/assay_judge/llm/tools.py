"""A judge's read-only tools over a run's sealed files.

Every file content goes back to the model inside an `<artifact>` block (see `delimit`),
images as image parts for multimodal judges. Tools never write, never run code and never
reach a sandbox; a failing tool returns an error result, it does not stop the judge.
Parsing tables and documents runs in a worker thread under a time limit, so a hostile file
never blocks the event loop; past the limit the judge gets an error and moves on (the
thread finishes on its own: the readers' size caps bound how long that can be).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from assay.providers import (
    ImageMediaType,
    ImagePart,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
)
from assay.sealed import ReadError, image_info, read_document, text_page
from assay.sealed.tables import read_table
from assay_schemas import BlobCorrupted, BlobNotFound, FileRef

from ..delimit import artifact_block, one_line
from ..files import SealedFiles
from ..killable import Died, Killable, OverTime, Raised

__all__ = ["READ_TOOLS", "JudgeToolBox", "ToolLimits"]


Content = str | tuple[TextPart | ImagePart, ...]
"""A tool result: text, or text and image parts."""

_STR: dict[str, Any] = {"type": "string"}
_INT: dict[str, Any] = {"type": "integer", "minimum": 0}


def _on_path(name: str, description: str, **options: dict[str, Any]) -> ToolDefinition:
    """A tool that takes a sealed file's path and, optionally, a few integer/string options."""
    return ToolDefinition(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": {"path": _STR, **options},
            "required": ["path"],
        },
    )


READ_TOOLS: list[ToolDefinition] = [
    ToolDefinition(
        name="list_files",
        description="List every sealed file of the run: path, size, media type, hash.",
        parameters={"type": "object", "properties": {}},
    ),
    _on_path(
        "read_file",
        "Read a text file by lines (offset = first line, 0-based; limit = lines).",
        offset=_INT,
        limit=_INT,
    ),
    _on_path(
        "read_table",
        "Shape, dtypes, first rows and column summary of a CSV/TSV/XLSX/Parquet file.",
        head=_INT,
        sheet=_STR,
    ),
    _on_path(
        "read_document",
        "Text of a DOCX or PDF document (offset/limit in characters).",
        offset=_INT,
        limit=_INT,
    ),
    _on_path("view_image", "Look at a PNG or JPEG image (figures, plots)."),
]


@dataclass(frozen=True, kw_only=True)
class ToolLimits:
    """Caps on what one tool call returns."""

    text_chars: int = 20_000
    default_lines: int = 400
    max_file_bytes: int = 50_000_000
    """Larger files are not fetched at all (only listed)."""
    max_image_bytes: int = 5_000_000
    parse_seconds: float = 30.0
    """Longest a table or document may take to parse."""


@dataclass(kw_only=True)
class JudgeToolBox:
    """Runs one judge's read-only tool calls against the sealed files."""

    files: SealedFiles
    multimodal: bool = True
    limits: ToolLimits = ToolLimits()
    processes: Killable = field(default_factory=Killable)
    """Where tables and documents are parsed: pure-Python parsers (pypdf, openpyxl) on a
    hostile file burn CPU under the GIL, so they run in a process killed at the limit."""

    async def run(self, call: ToolCall) -> ToolResultMessage:
        """Execute one call; problems come back as error results the model can read."""
        try:
            args = call.parsed_arguments()
            content = await self._dispatch(call.name, args)
        except (ValueError, KeyError, TypeError, ReadError, BlobNotFound, BlobCorrupted) as e:
            # A missing or corrupted blob is the run's fact: the judge is told. A store that
            # is down (any other StoreError) is not: it propagates, the handler is retried,
            # and the verdict is the one an undisturbed judge would have given.
            message = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
            # Errors quote file names the agent chose: escape them like any other content.
            content = f"error: {one_line(message)}"
            return ToolResultMessage(call_id=call.id, content=content, is_error=True)
        return ToolResultMessage(call_id=call.id, content=content)

    async def _dispatch(
        self, name: str, args: dict[str, Any]
    ) -> str | tuple[TextPart | ImagePart, ...]:
        if name == "list_files":
            lines = self.files.manifest_lines()
            return "\n".join(lines) if lines else "(the sealed workspace is empty)"
        handlers: dict[str, Callable[[FileRef, dict[str, Any]], Awaitable[Content]]] = {
            "read_file": self._read_file,
            "read_table": self._read_table,
            "read_document": self._read_document,
            "view_image": self._view_image,
        }
        if name not in handlers:
            raise ValueError(
                f"unknown tool {name!r}; tools: {', '.join(t.name for t in READ_TOOLS)}"
            )
        ref = self.files.ref(str(args.get("path", "")))
        if ref.size > self.limits.max_file_bytes:
            raise ReadError(
                f"{ref.path} is {ref.size} bytes, over the {self.limits.max_file_bytes} byte cap"
            )
        return await handlers[name](ref, args)

    async def _parse(self, ref: FileRef, parse: Callable[..., str], **kwargs: Any) -> str:
        try:
            text: str = await self.processes.call(parse, kwargs, seconds=self.limits.parse_seconds)
        except OverTime as e:
            raise ReadError(
                f"{ref.path} took over {self.limits.parse_seconds:g} s to parse; not read"
            ) from e
        except Died as e:
            raise ReadError(f"{ref.path}: its parser died; not read") from e
        except Raised as e:
            raise e.error from None
        return text

    async def _read_file(self, ref: FileRef, args: dict[str, Any]) -> str:
        data = await self.files.read(ref)
        page = text_page(
            data,
            offset=int(args.get("offset", 0)),
            limit=int(args.get("limit", self.limits.default_lines)),
            max_chars=self.limits.text_chars,
        )
        end = page.first_line + page.lines_shown
        more = end < page.total_lines or page.truncated
        return artifact_block(
            ref.path,
            ref.sha256,
            page.text,
            lines=f"{page.first_line}-{end} of {page.total_lines}",
        ) + (f"\n(more: call read_file with offset={end})" if more else "")

    async def _read_table(self, ref: FileRef, args: dict[str, Any]) -> str:
        data = await self.files.read(ref)
        sheet = args.get("sheet")
        head = int(args.get("head", 10))
        text = await self._parse(
            ref,
            read_table,
            data=data,
            path=ref.path,
            head=head,
            sheet=str(sheet) if sheet else None,
        )
        return artifact_block(ref.path, ref.sha256, text[: self.limits.text_chars], view="table")

    async def _read_document(self, ref: FileRef, args: dict[str, Any]) -> str:
        data = await self.files.read(ref)
        text = await self._parse(ref, read_document, data=data, path=ref.path)
        offset = max(0, int(args.get("offset", 0)))
        limit = min(max(1, int(args.get("limit", self.limits.text_chars))), self.limits.text_chars)
        chunk = text[offset : offset + limit]
        end = offset + len(chunk)
        more = f"\n(more: call read_document with offset={end})" if end < len(text) else ""
        return (
            artifact_block(ref.path, ref.sha256, chunk, chars=f"{offset}-{end} of {len(text)}")
            + more
        )

    async def _view_image(
        self, ref: FileRef, args: dict[str, Any]
    ) -> tuple[TextPart | ImagePart, ...]:
        if ref.size > self.limits.max_image_bytes:
            raise ReadError(
                f"{ref.path} is {ref.size} bytes, over the {self.limits.max_image_bytes} byte image cap"
            )
        data = await self.files.read(ref)
        info = image_info(data)
        header = artifact_block(
            ref.path, ref.sha256, f"{info.media_type}, {info.width}x{info.height} px", view="image"
        )
        if not self.multimodal:
            return (
                TextPart(
                    text=header
                    + "\nThis judge model cannot see images, so the image is not shown. Judge the"
                    " figure from the code that made it and the data it plots, and say so."
                ),
            )
        media: ImageMediaType = "image/png" if info.media_type == "image/png" else "image/jpeg"
        return (
            TextPart(text=header + "\nThe image follows as data."),
            ImagePart.from_bytes(data, media),
        )
