"""A third source kind, written as a plugin would be: one module, registered with one line.

`[[kb.sources]] kind = "notes"` reads a notes export (JSON lines of id, title, text), the way a
wiki's or a notes app's export folder would be read; each note is a document with id "note:<id>".
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import cast

from mcp_kb.records import Progress
from mcp_kb.settings import KBConfig, SourceSettings
from mcp_kb.ingest.sources import Revisions, SourceFile, SourceScan

PREFIX = "note:"


class NotesSettings(SourceSettings):
    export: str  # the export file


class NotesSource:
    def __init__(self, settings: NotesSettings, cache_folder: Path) -> None:
        self.export = Path(settings.export)
        self.folder = cache_folder / "notes"

    @classmethod
    def of(cls, kb: KBConfig, cache_folder: Path) -> list[NotesSource]:
        return [cls(cast(NotesSettings, settings), cache_folder) for settings in kb.sources if settings.kind == "notes"]

    @staticmethod
    def owns(doc_id: str) -> bool:
        return doc_id.startswith(PREFIX)

    @staticmethod
    def kind_of(doc_id: str) -> str:
        return "note"

    def _notes(self) -> dict[str, dict[str, str]]:
        lines = self.export.read_text(encoding="utf-8").splitlines()
        return {PREFIX + note["id"]: note for note in map(json.loads, filter(str.strip, lines))}

    def _file(self, doc_id: str, note: dict[str, str]) -> SourceFile:
        """The note as a Markdown file in the cache, rewritten only when it changed."""
        path = self.folder / (hashlib.sha256(doc_id.encode()).hexdigest()[:16] + ".md")
        text = f"# {note['title']}\n\n{note['text']}\n"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            self.folder.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        info = path.stat()
        return SourceFile(path, doc_id, info.st_size, info.st_mtime_ns)

    def scan(
        self, known: dict[str, tuple[int, int]], progress: Progress | None = None, revisions: Revisions | None = None
    ) -> SourceScan:
        files = [self._file(doc_id, note) for doc_id, note in self._notes().items()]
        return SourceScan(files, [], {"notes": len(files)})

    def watch_folders(self) -> list[Path]:
        return [self.export.parent]

    def concerns(self, path: Path) -> bool:
        return path == self.export
