"""PDF fixtures written by the tests themselves (fpdf2 for text, pypdf for encryption)."""

from __future__ import annotations

from pathlib import Path

from fpdf import FPDF
from pypdf import PdfReader, PdfWriter


def text_pdf(path: Path, pages: list[str], title: str = "") -> Path:
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    pdf.output(str(path))
    return path


def image_only_pdf(path: Path) -> Path:
    """A 'scan': drawings, no text layer."""
    pdf = FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 100, 60, style="F")
    pdf.output(str(path))
    return path


def encrypted_pdf(source: Path, path: Path, user_password: str) -> Path:
    writer = PdfWriter()
    for page in PdfReader(source).pages:
        writer.add_page(page)
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="AES-128")
    with path.open("wb") as handle:
        writer.write(handle)
    return path
