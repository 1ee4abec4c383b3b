"""OCR of images and scanned PDF pages (the `ocr` extra; CI installs it)."""

import difflib
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import cjk_font, write

from mcp_kb.errors import ParseError
from mcp_kb.ingest import ocr
from mcp_kb.ingest.parsers import parse_file
from mcp_kb.api import SearchRequest
from helpers import MakeApp

FONT = cjk_font()
ENGLISH = "Annual leave needs two weeks notice in the HR portal."
CHINESE = "年假需要提前两周在人事系统中申请。"
needs_ocr = pytest.mark.skipif(not ocr.available(), reason="the ocr extra is not installed (CI installs it)")
needs_font = pytest.mark.skipif(
    FONT is None,
    reason="no font draws Chinese here: install one (Debian: fonts-wqy-microhei) "
    "or set MCP_KB_TEST_FONT to a .ttf/.ttc file",
)


def draw(path: Path, lines: list[str], size: tuple[int, int] = (1400, 320)) -> Path:
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", size, "white")
    canvas = ImageDraw.Draw(image)
    font = ImageFont.truetype(str(FONT), 40) if FONT else ImageFont.load_default(40)  # the default draws Latin only
    for number, line in enumerate(lines):
        canvas.text((30, 40 + 110 * number), line, font=font, fill="black")
    image.save(path)
    return path


def similarity(found: str, expected: str) -> float:
    squeeze: Callable[[str], str] = lambda text: "".join(text.split())  # noqa: E731
    return difflib.SequenceMatcher(None, squeeze(found), squeeze(expected)).ratio()


@needs_ocr
@needs_font
def test_an_image_of_english_and_chinese_text_is_read(tmp_path: Path) -> None:
    document = parse_file(draw(tmp_path / "notice.png", [ENGLISH, CHINESE]), "notice.png")
    text = "\n".join(block.text for block in document.blocks)
    assert similarity(text, ENGLISH + CHINESE) >= 0.9, text
    assert document.ocr_pages == 1


@needs_ocr
@needs_font
def test_a_pdf_with_a_text_page_and_a_scanned_page_gets_both(tmp_path: Path) -> None:
    from fpdf import FPDF

    scan = draw(tmp_path / "scan.png", [ENGLISH, CHINESE])
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 8, "The typed page explains the travel policy.")
    pdf.add_page()
    pdf.image(str(scan), x=10, y=10, w=190)
    pdf.output(str(tmp_path / "mixed.pdf"))
    document = parse_file(tmp_path / "mixed.pdf", "mixed.pdf")
    by_page = {block.page: block.text for block in document.blocks}
    assert "travel policy" in by_page[1]
    assert similarity(by_page[2], ENGLISH + CHINESE) >= 0.9
    assert document.ocr_pages == 1 and document.notes == ("pages read by OCR: 2",)


@needs_ocr
def test_an_image_without_text_and_a_huge_image_end_in_bounded_work(tmp_path: Path) -> None:
    from PIL import Image

    Image.new("RGB", (800, 600), "white").save(tmp_path / "blank.png")
    with pytest.raises(ParseError, match="OCR found no text"):
        parse_file(tmp_path / "blank.png", "blank.png")
    big = Image.new("RGB", (9000, 7000), "white")  # 63 MP
    assert max(ocr.bounded(big).size) == ocr.OCR_SIDE


def test_without_the_engine_images_and_scans_say_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pdfs import image_only_pdf

    monkeypatch.setattr(ocr, "available", lambda: False)
    draw(tmp_path / "notice.png", [ENGLISH])
    with pytest.raises(ParseError, match=r"pip install rapidocr-onnxruntime into mcp-kb.s environment"):
        parse_file(tmp_path / "notice.png", "notice.png")
    with pytest.raises(ParseError, match=r"no text layer.*pip install rapidocr-onnxruntime"):
        parse_file(image_only_pdf(tmp_path / "scan.pdf"), "scan.pdf")


def test_ocr_off_for_a_kb_leaves_images_unread(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="OCR is off"):
        parse_file(draw(tmp_path / "notice.png", [ENGLISH]), "notice.png", ocr=False)


@needs_ocr
@needs_font
def test_sync_reads_images_counts_ocr_pages_and_search_finds_the_text(make_app: MakeApp, tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    draw(tmp_path / "docs" / "notice.png", [ENGLISH, CHINESE])
    write(tmp_path / "docs" / "other.md", "# Other\n\nNothing about leave here, only parking rules.\n")
    app = make_app(
        {
            "name": "docs",
            "description": "d",
            "paths": [str(tmp_path / "docs")],
            "filterable": {"ocr": {"type": "boolean"}},
        }
    )
    [report] = app.sync()
    assert report.pages_ocr == 1 and not report.failures and "1 pages read by OCR" in report.summary()
    hit = app.search("docs", SearchRequest(query="two weeks notice HR portal", mode="keyword", top_k=1)).hits[0]
    assert hit.source == "notice.png"
    marked = app.search("docs", SearchRequest(query="leave", mode="filter", filters={"ocr": True})).hits
    assert [h.source for h in marked] == ["notice.png"]
    off = make_app(
        {
            "name": "docs",
            "description": "d",
            "paths": [str(tmp_path / "docs")],
            "ocr": "off",
            "filterable": {"ocr": {"type": "boolean"}},
        }
    )
    [rebuilt] = off.sync()
    assert "reading images (OCR) changed" in rebuilt.rebuilt
    assert [f.path for f in rebuilt.failures] == ["notice.png"]
