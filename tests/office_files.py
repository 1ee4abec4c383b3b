"""Word, PowerPoint and Excel files made with the libraries that read them, for the parser tests and the
harness."""

from datetime import date, datetime
from pathlib import Path


def make_docx(path: Path, extra: str = "") -> Path:
    from docx import Document

    document = Document()
    document.core_properties.title = "Quarterly report"
    document.core_properties.author = "Finance team"
    document.core_properties.created = datetime(2024, 3, 1, 9, 30)
    document.add_heading("Results", level=1)
    document.add_paragraph("Revenue grew in every region this year, led by subscriptions and services." + extra)
    document.add_heading("Q3", level=2)
    document.add_paragraph("The third quarter closed with record orders from Asia.")
    table = document.add_table(rows=3, cols=2)
    for row, (region, revenue) in zip(table.rows, [("Region", "Revenue"), ("Asia", "120"), ("Europe", "95")]):
        row.cells[0].text, row.cells[1].text = region, revenue
    document.add_paragraph("Hire two analysts", style="List Bullet")
    document.add_paragraph("Open the Osaka office", style="List Bullet")
    document.add_heading("中文部分", level=1)
    document.add_paragraph("第三季度亚洲订单创下新高。")
    document.sections[0].header.paragraphs[0].text = "CONFIDENTIAL HEADER"
    document.save(str(path))
    return path


def make_pptx(path: Path) -> Path:
    from pptx import Presentation

    deck = Presentation()
    for title, body, notes in [
        ("Roadmap", "Ship search v2 in May", "Mention the beta users"),
        ("Risks", "Hiring is slow", ""),
        ("Budget", "Twelve engineers", "Ask for two more"),
    ]:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    deck.save(str(path))
    return path


def make_xlsx(path: Path) -> Path:
    from openpyxl import Workbook

    workbook = Workbook()
    orders = workbook.active
    orders.title = "Orders"
    orders.append(["Customer", "Amount", "Date", "Total"])
    orders.append(["Acme", 120.5, date(2024, 5, 2), "=B2*2"])
    orders.append(["Globex", 80, date(2024, 6, 1), "=B3*2"])
    people = workbook.create_sheet("People")
    people.append(["Name", "Role"])
    people.append(["Ada", "Engineer"])
    workbook.create_sheet("Empty")
    hidden = workbook.create_sheet("Secret")
    hidden.append(["key", "value"])
    hidden.append(["password", "hunter2"])
    hidden.sheet_state = "hidden"
    workbook.save(path)
    return path
