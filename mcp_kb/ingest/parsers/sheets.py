"""Spreadsheets: .xlsx via openpyxl (cached formula values, streamed), .csv and .tsv via the csv module.

Each sheet is a section named after it; each row becomes a record of `column: value` lines, so a
chunk of rows reads on its own and every chunk knows the header. Rows are packed into chunks by
the token budget and never split inside. Hidden and empty sheets are skipped with a note; a run of
empty rows ends a sheet (formatting can stretch a sheet to a million blank rows).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

from ..document import Block, Document
from ...errors import ParseError
from .bounds import check_time
from .office import checked_package
from .text import read_text

MAX_ROWS = 100_000  # per sheet; the rest is reported, not indexed
_EMPTY_RUN = 1_000  # this many empty rows in a row end a sheet


def parse_xlsx(path: Path, doc_id: str) -> Document:
    from openpyxl import load_workbook

    workbook = load_workbook(
        checked_package(path, "Excel"), read_only=True, data_only=True
    )  # data_only: formulas give their cached values
    try:
        blocks: list[Block] = []
        notes: list[str] = []
        for sheet in workbook.worksheets:
            if sheet.sheet_state != "visible":
                notes.append(f"sheet {sheet.title!r} skipped: hidden")
                continue
            sheet.reset_dimensions()  # rows as stored: a declared A1:XFD1048576 must not pad every row
            records, note = _records(sheet.iter_rows(values_only=True), (sheet.title,))
            blocks += records
            if note:
                notes.append(f"sheet {sheet.title!r} {note}")
    finally:
        workbook.close()
    if not blocks:
        raise ParseError(
            "nothing to index: every sheet is empty or hidden" + (f" ({'; '.join(notes)})" if notes else "")
        )
    return Document(doc_id, "xlsx", path.stem, tuple(blocks), notes=tuple(notes))


def parse_delimited(path: Path, doc_id: str) -> Document:
    text = read_text(path)  # UTF-8, UTF-16 or a legacy encoding such as GB18030
    delimiter = "\t" if path.suffix.lower() == ".tsv" else _sniffed_delimiter(text)
    records, note = _records(csv.reader(io.StringIO(text), delimiter=delimiter), (path.stem,))
    if not records:
        raise ParseError("nothing to index: no rows with values")
    return Document(doc_id, "csv", path.stem, tuple(records), notes=(f"{note}",) if note else ())


def _sniffed_delimiter(text: str) -> str:
    try:
        return csv.Sniffer().sniff(text[:4096], delimiters=",;\t|").delimiter
    except csv.Error:
        return ","


def _records(rows: Iterable[Iterable[Any]], heading: tuple[str, ...]) -> tuple[list[Block], str]:
    """Blocks of `column: value` lines, one per row after the header; and a note when rows were cut."""
    header: list[str] = []
    blocks: list[Block] = []
    empty_run = 0
    for number, row in enumerate(rows, start=1):
        check_time()
        values = [_cell(value) for value in row]
        if not any(values):
            empty_run += 1
            if empty_run >= _EMPTY_RUN:
                break
            continue
        empty_run = 0
        if not header:
            header = [value or f"column {i + 1}" for i, value in enumerate(values)]
            continue
        if len(blocks) >= MAX_ROWS:
            return blocks, f"rows after {MAX_ROWS:,} were left out"
        lines = [f"{_name(header, i)}: {value}" for i, value in enumerate(values) if value]
        blocks.append(Block("\n".join(lines), heading, line_start=number, line_end=number))
    if not blocks:
        return [], "skipped: no rows with values" if header else "skipped: empty"
    return blocks, ""


def _name(header: list[str], index: int) -> str:
    return header[index] if index < len(header) else f"column {index + 1}"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="minutes") if value.time() != time() else value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return " ".join(str(value).split())
