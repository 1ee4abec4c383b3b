from pathlib import Path

import pytest
from helpers import SHARED, write
from pdfs import encrypted_pdf, image_only_pdf, text_pdf

from mcp_kb.errors import ParseError
from mcp_kb.ingest.parsers import parse_file
from helpers import MakeConfig

MARKDOWN = """---
title: Leave policy
tags: [hr, leave]
doc_type: policy
---
# Leave

Intro paragraph.

## Annual leave

### How to apply

Submit the form 年假申请 two weeks ahead.

```bash
# not a heading
echo hi
```

| code | meaning |
|------|---------|
| E002 | auth failed |

## Sick leave { #sick }

Call your manager.
"""


def test_markdown_heading_tree_front_matter_and_lines(tmp_path: Path) -> None:
    document = parse_file(write(tmp_path / "leave.md", MARKDOWN), "leave.md")
    assert document.title == "Leave policy"
    assert document.metadata["tags"] == ["hr", "leave"]
    paths = [block.heading_path for block in document.blocks]
    assert ("Leave", "Annual leave", "How to apply") in paths
    assert paths[-1] == ("Leave", "Sick leave")  # the {#anchor} is dropped
    apply = next(b for b in document.blocks if "年假申请" in b.text)
    assert apply.line_start is not None and MARKDOWN.splitlines()[apply.line_start - 1] == apply.text


def test_markdown_code_fence_and_table_stay_whole_blocks(tmp_path: Path) -> None:
    document = parse_file(write(tmp_path / "leave.md", MARKDOWN), "leave.md")
    fence = next(b for b in document.blocks if "echo hi" in b.text)
    assert fence.atomic and "# not a heading" in fence.text and fence.text.startswith("```")
    table = next(b for b in document.blocks if "E002" in b.text)
    assert table.atomic and table.heading_path == ("Leave", "Annual leave", "How to apply")


def test_markdown_without_front_matter_takes_first_h1_as_title(tmp_path: Path) -> None:
    document = parse_file(write(tmp_path / "x.md", "# Hello\n\ntext\n"), "x.md")
    assert document.title == "Hello" and document.metadata == {}


def test_gb18030_text_is_detected_not_garbled(tmp_path: Path) -> None:
    text = "员工年假申请流程：请提前两周提交申请，经部门经理批准后生效。病假需要提供医院证明。"
    document = parse_file(write(tmp_path / "gb.txt", text, encoding="gb18030"), "gb.txt")
    assert document.blocks[0].text == text


def test_big5_text_is_detected(tmp_path: Path) -> None:
    text = "員工年假申請流程：請提前兩週提交申請，經部門經理批准後生效。病假需要提供醫院證明。"
    document = parse_file(write(tmp_path / "big5.txt", text, encoding="big5"), "big5.txt")
    assert document.blocks[0].text == text


def test_utf8_bom_and_utf16_are_decoded(tmp_path: Path) -> None:
    assert parse_file(write(tmp_path / "a.txt", "\ufeffhello"), "a.txt").blocks[0].text == "hello"
    (tmp_path / "b.txt").write_bytes("\ufeff你好 world".encode("utf-16-le"))
    assert parse_file(tmp_path / "b.txt", "b.txt").blocks[0].text == "你好 world"


@pytest.mark.parametrize("encoding", ["windows-1251", "koi8-r", "iso-8859-7"])
def test_html_in_the_charset_its_meta_declares(tmp_path: Path, encoding: str) -> None:
    body = "Οδηγίες εγκατάστασης του πακέτου." if encoding == "iso-8859-7" else "Установите пакет командой pip."
    html = f'<html><head><meta charset="{encoding}"><title>T</title></head><body><main><h1>H</h1><p>{body}</p></main>'
    (tmp_path / "page.html").write_bytes((html + "</body></html>").encode(encoding))
    document = parse_file(tmp_path / "page.html", "page.html")
    assert body in " ".join(b.text for b in document.blocks)


def test_empty_file_gives_no_blocks(tmp_path: Path) -> None:
    assert parse_file(write(tmp_path / "empty.md", ""), "empty.md").blocks == ()


def test_html_keeps_main_content_only(tmp_path: Path) -> None:
    html = """<html><head><title>Guide</title><script>var x = 'secret';</script></head><body>
    <nav>Home | About</nav><header>Site header</header>
    <main><h1>Install</h1><p>Run the installer.</p><h2>Linux</h2><p>Use apt.</p>
    <table><tr><th>os</th><th>cmd</th></tr><tr><td>debian</td><td>apt</td></tr></table></main>
    <footer>Copyright</footer></body></html>"""
    document = parse_file(write(tmp_path / "g.html", html), "g.html")
    text = " ".join(b.text for b in document.blocks)
    assert document.title == "Guide"
    assert "Run the installer." in text and "debian | apt" in text
    for noise in ("secret", "Home | About", "Site header", "Copyright"):
        assert noise not in text
    assert next(b for b in document.blocks if b.text == "Use apt.").heading_path == ("Install", "Linux")


def test_json_and_jsonl_give_one_block_per_record(tmp_path: Path) -> None:
    doc = parse_file(
        write(
            tmp_path / "faq.json",
            '[{"question": "How?", "answer": "Like this"}, {"question": "Why?", "answer": "Because"}]',
        ),
        "faq.json",
    )
    assert [b.heading_path for b in doc.blocks] == [("How?",), ("Why?",)]
    assert "answer: Like this" in doc.blocks[0].text and doc.one_chunk_per_block
    lines = parse_file(write(tmp_path / "r.jsonl", '{"id": 1, "text": "a"}\n\n{"id": 2, "text": "b"}\n'), "r.jsonl")
    assert len(lines.blocks) == 2


def test_invalid_json_is_a_parse_error_with_line(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="invalid JSON on line 2"):
        parse_file(write(tmp_path / "bad.jsonl", '{"a": 1}\n{oops\n'), "bad.jsonl")


def test_pdf_text_per_page_with_page_numbers(tmp_path: Path) -> None:
    path = text_pdf(
        tmp_path / "manual.pdf", ["First page about installation.", "Second page about errors E5021."], title="Manual"
    )
    document = parse_file(path, "manual.pdf")
    assert document.title == "Manual"
    assert [(b.page, "E5021" in b.text) for b in document.blocks] == [(1, False), (2, True)]


def test_pdf_encrypted_with_empty_password_opens(tmp_path: Path) -> None:
    source = text_pdf(tmp_path / "plain.pdf", ["Open secret text."])
    document = parse_file(encrypted_pdf(source, tmp_path / "e.pdf", ""), "e.pdf")
    assert "Open secret text." in document.blocks[0].text


def test_pdf_needing_a_password_is_reported(tmp_path: Path) -> None:
    source = text_pdf(tmp_path / "plain.pdf", ["Closed text."])
    with pytest.raises(ParseError, match="encrypted: needs a password"):
        parse_file(encrypted_pdf(source, tmp_path / "locked.pdf", "s3cret"), "locked.pdf")


def test_pdf_without_text_layer_is_reported_not_indexed(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="no text layer"):
        parse_file(image_only_pdf(tmp_path / "scan.pdf"), "scan.pdf")


def test_malformed_pdf_is_a_parse_error(tmp_path: Path) -> None:
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 9 0 R >> endobj\ntrailer\n%%EOF")
    with pytest.raises(ParseError, match="parse error|no text layer"):
        parse_file(tmp_path / "broken.pdf", "broken.pdf")


SHARED_PDFS = sorted((SHARED / "eval" / "pdfs").rglob("*.pdf")) if (SHARED / "eval" / "pdfs").is_dir() else []


@pytest.mark.skipif(not SHARED_PDFS, reason="../shared/eval/pdfs is not on this machine")
def test_every_real_pdf_ends_as_text_or_a_clear_reason() -> None:
    outcomes = {"text": 0, "encrypted": 0, "no text layer": 0, "parse error": 0}
    for path in SHARED_PDFS:
        try:
            document = parse_file(path, path.name, ocr=False)  # the text layer alone (OCR: test_ocr.py)
            assert document.blocks, path
            outcomes["text"] += 1
        except ParseError as exc:
            reason = str(exc)
            kind = next((k for k in ("encrypted", "no text layer", "parse error") if reason.startswith(k)), None)
            assert kind, f"{path.name}: unclear reason {reason!r}"
            outcomes[kind] += 1
    assert outcomes["text"] > len(SHARED_PDFS) // 2
    assert outcomes["encrypted"] >= 1 and outcomes["no text layer"] >= 1


@pytest.mark.skipif(not SHARED_PDFS, reason="../shared/eval/pdfs is not on this machine")
def test_known_shared_pdf_outcomes() -> None:
    by_name = {path.name: path for path in SHARED_PDFS}
    with pytest.raises(ParseError, match="encrypted: needs a password"):
        parse_file(by_name["libreoffice-writer-password.pdf"], "x.pdf")
    with pytest.raises(ParseError, match="parse error"):
        parse_file(by_name["unreadablemetadata.pdf"], "x.pdf")


def test_a_parser_that_declares_a_binary_format_gets_binary_files(
    make_config: MakeConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_kb.ingest import parsers
    from mcp_kb.ingest.document import Block, Document
    from mcp_kb.ingest.folders import scan_folders

    monkeypatch.setattr(parsers, "_PARSERS", dict(parsers._PARSERS))  # registrations end with the test
    monkeypatch.setattr(parsers, "_BINARY", set(parsers._BINARY))

    def parse_blob(path: Path, doc_id: str) -> Document:
        return Document(doc_id, "blob", path.stem, (Block(f"{len(path.read_bytes())} bytes"),))

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "data.blob").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "docs" / "data.tblob").write_bytes(bytes(range(256)) * 4)
    parsers.register([".blob"], parse_blob, binary=True)
    parsers.register([".tblob"], parse_blob)  # a text format: binary bytes are refused before parsing
    scan = scan_folders(make_config({"name": "d", "description": "d", "paths": [str(tmp_path / "docs")]}).kb[0])
    assert [f.doc_id for f in scan.files] == ["data.blob"]
    assert [s.doc_id for s in scan.skipped] == ["data.tblob"] and "binary" in scan.skipped[0].reason
