"""Word, PowerPoint and spreadsheets: files made here with the same libraries, parsed, chunked, synced."""

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import png_declaring, write
from office_files import make_docx, make_pptx, make_xlsx

from mcp_kb.settings import ChunkingConfig
from mcp_kb.errors import ParseError
from mcp_kb.ingest.chunking import chunk_document
from mcp_kb.ingest.document import Block
from mcp_kb.ingest.parsers import parse_file
from mcp_kb.api import SearchRequest
from helpers import MakeApp
from mcp_kb.models.fastembed_tokenizer import ModelTokenizer


def test_word_headings_tables_lists_and_properties(tmp_path: Path, tokenizer: ModelTokenizer) -> None:
    document = parse_file(make_docx(tmp_path / "report.docx"), "report.docx")
    assert document.title == "Quarterly report"
    assert document.metadata == {
        "author": "Finance team",
        "created": "2024-03-01",
        "modified": document.metadata["modified"],
    }
    paths = {block.heading_path for block in document.blocks}
    assert ("Results", "Q3") in paths and ("中文部分",) in paths
    table = next(b for b in document.blocks if b.text.startswith("| Region"))
    assert table.atomic and "| Asia | 120 |" in table.text and table.heading_path == ("Results", "Q3")
    assert any(b.text == "- Hire two analysts\n- Open the Osaka office" for b in document.blocks)
    assert not any("CONFIDENTIAL" in b.text for b in document.blocks)  # headers are left out
    chunks = chunk_document(document, ChunkingConfig(), tokenizer)
    assert any(c.heading == "Results › Q3" and "record orders" in c.text for c in chunks)


def test_slides_are_sections_with_their_number_as_page_and_notes(tmp_path: Path) -> None:
    document = parse_file(make_pptx(tmp_path / "plan.pptx"), "plan.pptx")
    by_page: dict[int, list[Block]] = {}
    for block in document.blocks:
        assert block.page is not None
        by_page.setdefault(block.page, []).append(block)
    assert sorted(by_page) == [1, 2, 3]
    assert by_page[1][0].heading_path == ("Roadmap",) and by_page[1][0].text == "Ship search v2 in May"
    assert "Speaker notes: Mention the beta users" in [b.text for b in by_page[1]]
    assert [b.text for b in by_page[2]] == ["Hiring is slow"]


def test_sheets_become_records_with_their_header_and_cached_formula_values(
    tmp_path: Path, tokenizer: ModelTokenizer
) -> None:
    path = make_xlsx(tmp_path / "book.xlsx")
    document = parse_file(path, "book.xlsx")
    orders = [b for b in document.blocks if b.heading_path == ("Orders",)]
    assert orders[0].text.startswith("Customer: Acme\nAmount: 120.5\nDate: 2024-05-02")
    assert orders[0].line_start == 2  # the row number
    assert any(b.heading_path == ("People",) and b.text == "Name: Ada\nRole: Engineer" for b in document.blocks)
    assert not any("hunter2" in b.text for b in document.blocks)
    assert any("'Secret' skipped: hidden" in note for note in document.notes)
    assert any("'Empty' skipped: empty" in note for note in document.notes)
    chunks = chunk_document(document, ChunkingConfig(max_tokens=32, overlap=0, min_tokens=0), tokenizer)
    assert all(chunk.text.count("Customer:") == chunk.text.count("Amount:") for chunk in chunks)  # rows whole


def test_formulas_give_the_value_excel_saved(tmp_path: Path) -> None:
    """openpyxl cannot compute formulas; a workbook saved by Excel carries the results, which are used."""
    from openpyxl import load_workbook

    path = make_xlsx(tmp_path / "book.xlsx")
    workbook = load_workbook(path)
    workbook["Orders"]["D2"] = 241  # what Excel would have cached for =B2*2
    workbook.save(path)
    document = parse_file(path, "book.xlsx")
    assert "Total: 241" in document.blocks[0].text


def test_csv_in_gb18030_and_tsv(tmp_path: Path) -> None:
    rows = "".join(
        f"{name},{price},{note}\n"
        for name, price, note in [
            ("年卡", 199, "全年不限次数使用，适合经常出差的员工"),
            ("月卡", 29, "一个月内有效，到期后自动续费"),
            ("季卡", 79, "三个月内有效，可以随时申请退款"),
        ]
    )
    csv_path = write(tmp_path / "价格.csv", "产品,价格,说明\n" + rows, encoding="gb18030")
    document = parse_file(csv_path, "价格.csv")
    assert document.blocks[1].text == "产品: 月卡\n价格: 29\n说明: 一个月内有效，到期后自动续费"
    assert document.blocks[0].heading_path == ("价格",)
    tsv = parse_file(write(tmp_path / "codes.tsv", "code\tmeaning\nE5021\ttoken expired\n"), "codes.tsv")
    assert tsv.blocks[0].text == "code: E5021\nmeaning: token expired"


def _zip_of(files: dict[str, str]) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "name, content, reason",
    [
        ("old.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100, "old binary Word format"),
        ("locked.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100, "password-protected"),
        ("fake.docx", b"this is plain text, not a zip package", "must be a zip package"),
        ("truncated.pptx", b"PK\x03\x04" + b"\0" * 50, "must be a zip package"),
        ("other.pptx", _zip_of({"hello.txt": "a zip, but not a slide deck"}), "parse error"),
        ("old.xls", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100, "old binary Excel format"),
    ],
)
def test_bad_office_files_get_one_line_reasons(tmp_path: Path, name: str, content: bytes, reason: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ParseError, match=reason) as caught:
        parse_file(path, name)
    assert "\n" not in str(caught.value)


def test_a_sheet_stretched_by_formatting_ends_at_its_data(tmp_path: Path) -> None:
    from openpyxl import Workbook

    workbook = Workbook()
    sheet = workbook.active
    sheet.append(["item", "count"])
    sheet.append(["bolts", 12])
    sheet.cell(row=200_000, column=1).value = None  # formatting-only rows reach far down
    sheet.cell(row=200_000, column=1).number_format = "0.00"
    workbook.save(tmp_path / "wide.xlsx")
    document = parse_file(tmp_path / "wide.xlsx", "wide.xlsx")
    assert [b.text for b in document.blocks] == ["item: bolts\ncount: 12"]


def test_office_files_sync_search_and_resync_when_one_changes(make_app: MakeApp, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    make_docx(docs / "report.docx")
    make_pptx(docs / "plan.pptx")
    make_xlsx(docs / "book.xlsx")
    write(docs / "codes.csv", "code,meaning\nE5021,token expired\n")
    app = make_app(
        {"name": "docs", "description": "d", "paths": [str(docs)], "filterable": {"author": {"type": "string"}}}
    )
    [report] = app.sync()
    assert report.files_added == 4 and not report.failures
    hit = app.search("docs", SearchRequest(query="record orders from Asia", mode="keyword", top_k=1)).hits[0]
    assert hit.citation == "report.docx › Results › Q3"
    slide = app.search("docs", SearchRequest(query="Twelve engineers budget", mode="keyword", top_k=1)).hits[0]
    assert (slide.source, slide.page, slide.heading) == ("plan.pptx", 3, "Budget")
    row = app.search("docs", SearchRequest(query="Globex", mode="keyword", top_k=1)).hits[0]
    assert row.source == "book.xlsx" and "Amount: 80" in row.text
    by_author = app.search("docs", SearchRequest(query="revenue", filters={"author": "Finance team"}, top_k=5)).hits
    assert by_author and {h.source for h in by_author} == {"report.docx"}
    make_docx(docs / "report.docx", extra=" Margins improved too.")
    [again] = app.sync()
    assert (again.files_changed, again.files_unchanged) == (1, 3)


# ---- bounds: what one file may unpack, hold and spend ------------------------------------------


def _with_part(source: Path, target: Path, name: str, megabytes: int, content: bytes = b"\0") -> None:
    """A copy of an Office package with one more part that inflates to `megabytes` (small on disk)."""
    import zipfile

    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as copy:
        for item in original.infolist():
            copy.writestr(item, original.read(item))
        with copy.open(name, "w") as part:
            block = content * (1024 * 1024 // len(content))
            for _ in range(megabytes):
                part.write(block)


@pytest.mark.parametrize(
    "kind, maker, megabytes, shown",
    [("docx", make_docx, 1024, "1.0 GB"), ("pptx", make_pptx, 300, "300 MB"), ("xlsx", make_xlsx, 300, "300 MB")],
)
def test_a_small_package_that_unpacks_past_the_limit_fails_before_it_is_read(
    tmp_path: Path, kind: str, maker: Callable[[Path], Path], megabytes: int, shown: str
) -> None:
    _with_part(maker(tmp_path / f"plain.{kind}"), tmp_path / f"bomb.{kind}", "media/padding.bin", megabytes)
    assert (tmp_path / f"bomb.{kind}").stat().st_size < 5 * 1024 * 1024
    with pytest.raises(ParseError, match=rf"unpacks to {shown}, over the 200 MB limit"):
        parse_file(tmp_path / f"bomb.{kind}", f"bomb.{kind}")


def test_a_package_whose_xml_would_not_fit_in_memory_fails_with_its_size(tmp_path: Path) -> None:
    _with_part(make_docx(tmp_path / "plain.docx"), tmp_path / "xml.docx", "word/glossary.xml", 80, b"<w:p/>")
    with pytest.raises(ParseError, match=r"its XML unpacks to 8\d MB, over the 50 MB limit"):
        parse_file(tmp_path / "xml.docx", "xml.docx")


def test_a_declared_sheet_size_far_beyond_its_cells_costs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dimension a file declares is a claim: cells are read as stored, not padded out to it."""
    import zipfile

    from mcp_kb.ingest.parsers import sheets

    honest = make_xlsx(tmp_path / "honest.xlsx")
    with zipfile.ZipFile(honest) as original, zipfile.ZipFile(tmp_path / "lying.xlsx", "w") as copy:
        for item in original.infolist():
            data = original.read(item)
            if item.filename.startswith("xl/worksheets/"):
                data = re.sub(rb'<dimension ref="[^"]*"/>', b'<dimension ref="A1:XFD1048576"/>', data)
            copy.writestr(item, data)
    seen: list[object] = []
    real_cell = sheets._cell

    def counted(value: Any) -> Any:
        seen.append(value)
        return real_cell(value)

    monkeypatch.setattr(sheets, "_cell", counted)
    expected = parse_file(honest, "x.xlsx").blocks
    honest_cells, seen[:] = len(seen), []
    assert parse_file(tmp_path / "lying.xlsx", "x.xlsx").blocks == expected
    assert len(seen) == honest_cells


def test_a_file_out_of_time_fails_with_the_limit_and_the_next_file_has_its_own_budget(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="parsing took longer than 0 s, the limit per file"):
        parse_file(make_docx(tmp_path / "report.docx"), "report.docx", seconds=0.0)
    assert parse_file(tmp_path / "report.docx", "report.docx").blocks


def test_an_image_declaring_more_pixels_than_may_be_decoded_fails_before_decoding(tmp_path: Path) -> None:
    (tmp_path / "huge.png").write_bytes(png_declaring(13_000, 13_000))  # 13000×13000 RGBA: 676 MB decoded
    pytest.importorskip("rapidocr_onnxruntime", reason="the OCR extra reads images")
    with pytest.raises(ParseError, match=r"image of 13000×13000 pixels \(169 MP\), over the 60 MP limit"):
        parse_file(tmp_path / "huge.png", "huge.png")
