"""Real PDF and Word files for the reader tests, made with fpdf2 and python-docx (the test extra).

The handbook built here has a title, two chapters with numbered sections, a table, several pages, and one
"scanned" page: a picture with no text layer. Its facts are distinct so retrieval can find each one.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

TITLE = "Employee Handbook"
LEAVE_INTRO = ("Every employee accrues paid time off from the first month of service. Requests go through the HR "
               "portal and need the approval of the line manager before the leave starts.")
SICK = ("Sick leave needs a doctor's note after three consecutive days of absence. The note is uploaded to the HR "
        "portal within one week of returning to work.")
ALLOWANCE = "The yearly leave allowance depends on the grade of the employee, as the table below shows."
TABLE = [("Grade", "Days per year", "Carry over"), ("A", "20", "5"), ("B", "25", "8"), ("C", "30", "10")]
TRAVEL = ("Hotels in Boston are capped at 375 dollars per night. Book through the travel desk at least fourteen "
          "days before departure so the negotiated corporate rate applies.")
PER_DIEM = ("The per diem for meals is 60 dollars in domestic cities and 85 dollars abroad. Alcohol is never "
            "reimbursed, whatever the occasion.")
FILLER = ("This paragraph exists to fill the page with ordinary policy prose so that the chunker has to pack "
          "several paragraphs of one section into a chunk and cut between them. ")


def _noise_image(width: int = 480, height: int = 600, seed: int = 7):
    """A grey picture with texture, like a scanned page (no text layer)."""
    from PIL import Image

    rnd = bytearray()
    state = seed
    for _ in range(width * height):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        rnd.append(180 + (state >> 16) % 60)
    return Image.frombytes("L", (width, height), bytes(rnd))


def handbook_pdf(path: Path, *, outline: bool = True) -> Path:
    """Six pages: 1 leave + sick leave, 2 allowance table, 3 scanned picture only, 4 travel, 5 per diem,
    6 a long section. ``outline``: bookmarks for every heading; without, headings are only larger type."""
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_title(TITLE)
    pdf.set_auto_page_break(True, margin=20)

    def heading(text: str, level: int) -> None:
        size = {0: 24, 1: 18, 2: 14}[level]
        pdf.set_font("Helvetica", "B", size)
        if outline and level:
            pdf.start_section(text, level=level - 1)
        pdf.multi_cell(0, size * 0.5, text, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(3)

    def para(text: str) -> None:
        pdf.set_font("Helvetica", "", 11)
        pdf.multi_cell(0, 6, text, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(5)

    pdf.add_page()
    heading(TITLE, 0)
    heading("1. Leave", 1)
    para(LEAVE_INTRO)
    heading("1.1 Sick leave", 2)
    para(SICK)
    pdf.add_page()
    heading("1.2 Leave allowance", 2)
    para(ALLOWANCE)
    pdf.set_font("Helvetica", "", 11)
    with pdf.table() as table:
        for row in TABLE:
            cells = table.row()
            for cell in row:
                cells.cell(cell)
    pdf.ln(5)
    para("Unused days beyond the carry-over limit lapse on the first of January.")
    pdf.add_page()
    pdf.image(_noise_image(), x=20, y=20, w=170)
    pdf.add_page()
    heading("2. Travel", 1)
    heading("2.1 Hotels", 2)
    para(TRAVEL)
    pdf.add_page()
    heading("2.2 Per diem", 2)
    para(PER_DIEM)
    pdf.add_page()
    heading("3. Conduct", 1)
    for i in range(6):
        para(f"Conduct rule {i + 1}. " + FILLER * 2)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def long_table_pdf(path: Path) -> Path:
    """A table that runs from page 1 onto page 2 (fpdf2 repeats its header row on the new page)."""
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 18)
    pdf.multi_cell(0, 9, "Office locations", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 11)
    pdf.multi_cell(0, 6, "Every office of the company, with its city and the number of desks. " * 8,
                   new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    with pdf.table() as table:
        header = table.row()
        for cell in ("Office", "City", "Desks"):
            header.cell(cell)
        for i in range(40):
            row = table.row()
            for cell in (f"Office {i + 1:02d}", f"City {i + 1:02d}", str(10 + i)):
                row.cell(cell)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def text_pdf(path: Path, pages: int, *, image_mb: float = 0.0) -> Path:
    """``pages`` pages of plain prose, each optionally with an incompressible picture of about ``image_mb``."""
    from fpdf import FPDF
    from PIL import Image

    pdf = FPDF(format="A4")
    pdf.set_compression(False)
    side = int((image_mb * 1e6 / 3) ** 0.5) if image_mb else 0
    for n in range(1, pages + 1):
        pdf.add_page()
        pdf.set_font("Helvetica", "", 11)
        pdf.multi_cell(0, 6, f"Page {n} says: the code word for page {n} is word{n:04d}. " + FILLER,
                       new_x="LMARGIN", new_y="NEXT")
        if side:
            pdf.image(Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)), x=20, y=80, w=100)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def image_only_pdf(path: Path, pages: int = 2) -> Path:
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    for _ in range(pages):
        pdf.add_page()
        pdf.image(_noise_image(), x=20, y=20, w=170)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def blank_pdf(path: Path, pages: int = 2) -> Path:
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    for _ in range(pages):
        pdf.add_page()
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def encrypted_pdf(path: Path, user_password: str = "secret") -> Path:
    from fpdf import FPDF
    from fpdf.enums import EncryptionMethod

    pdf = FPDF(format="A4")
    pdf.add_page()
    pdf.set_font("Helvetica", "", 11)
    pdf.multi_cell(0, 6, "Salaries of the board are confidential. " * 5)
    pdf.set_encryption(owner_password="owner", user_password=user_password, encryption_method=EncryptionMethod.AES_128)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def handbook_docx(path: Path) -> Path:
    """The same handbook as a Word file: Title and Heading styles, a table, hard page breaks (python-docx writes no
    rendered page breaks), and a page holding only a picture."""
    import docx
    from docx.shared import Inches

    d = docx.Document()
    d.core_properties.title = TITLE
    d.add_heading(TITLE, 0)
    d.add_heading("1. Leave", 1)
    d.add_paragraph(LEAVE_INTRO)
    d.add_heading("1.1 Sick leave", 2)
    d.add_paragraph(SICK)
    d.add_page_break()  # -> page 2
    d.add_heading("1.2 Leave allowance", 2)
    d.add_paragraph(ALLOWANCE)
    table = d.add_table(rows=len(TABLE), cols=len(TABLE[0]))
    table.style = "Table Grid"
    for r, row in enumerate(TABLE):
        for c, cell in enumerate(row):
            table.cell(r, c).text = cell
    d.add_paragraph("Unused days beyond the carry-over limit lapse on the first of January.")
    d.add_paragraph("Submit leave requests", style="List Bullet")
    d.add_page_break()  # -> page 3: a scanned page, a picture only
    buf = io.BytesIO()
    _noise_image(240, 300).save(buf, format="PNG")
    buf.seek(0)
    d.add_picture(buf, width=Inches(5))
    d.add_page_break()  # -> page 4
    d.add_heading("2. Travel", 1)
    d.add_heading("2.1 Hotels", 2)
    d.add_paragraph(TRAVEL)
    d.add_page_break()  # -> page 5
    d.add_heading("2.2 Per diem", 2)
    d.add_paragraph(PER_DIEM)
    d.add_paragraph("| not a table | just text # with markup-like characters")
    path.parent.mkdir(parents=True, exist_ok=True)
    d.save(str(path))
    return path


def image_only_docx(path: Path) -> Path:
    import docx
    from docx.shared import Inches

    d = docx.Document()
    buf = io.BytesIO()
    _noise_image(240, 300).save(buf, format="PNG")
    buf.seek(0)
    d.add_picture(buf, width=Inches(5))
    path.parent.mkdir(parents=True, exist_ok=True)
    d.save(str(path))
    return path


def empty_docx(path: Path) -> Path:
    import docx

    path.parent.mkdir(parents=True, exist_ok=True)
    docx.Document().save(str(path))
    return path


def encrypted_docx(path: Path, password: str = "secret") -> Path:
    """A password-protected Word file, as Word writes one (an OLE container with the encrypted package)."""
    from msoffcrypto.format.ooxml import OOXMLFile

    plain = path.with_suffix(".plain.docx")
    handbook_docx(plain)
    with plain.open("rb") as src, path.open("wb") as out:
        OOXMLFile(src).encrypt(password, out)
    plain.unlink()
    return path


def docx_with_big_media(path: Path, media_mb: float) -> Path:
    """The handbook whose (referenced) picture part is ``media_mb`` MB of incompressible data, as a photo-heavy
    Word file is: python-docx's ``Document()`` would read all of it into memory."""
    import zipfile

    plain = handbook_docx(path.with_suffix(".plain.docx"))
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            if info.filename.startswith("word/media/"):
                out.writestr(info.filename, os.urandom(int(media_mb * 1e6)), compress_type=zipfile.ZIP_STORED)
            else:
                out.writestr(info, src.read(info.filename))
    plain.unlink()
    return path


def rendered_breaks_docx(path: Path) -> Path:
    """A Word file as Word saves it: page positions recorded as ``w:lastRenderedPageBreak`` in the runs (here a
    paragraph that starts page 2 and one that runs from page 2 onto page 3), no hard breaks."""
    import docx
    from docx.oxml import OxmlElement

    d = docx.Document()
    d.add_heading("Rendered", 1)
    d.add_paragraph("First page text about apples.")
    p2 = d.add_paragraph()
    p2.add_run()._r.append(OxmlElement("w:lastRenderedPageBreak"))
    p2.add_run("Second page text about bananas.")
    p3 = d.add_paragraph()
    p3.add_run("A paragraph that starts on page two about cherries")
    run = p3.add_run(" and ends on page three.")
    run._r.insert(0, OxmlElement("w:lastRenderedPageBreak"))
    path.parent.mkdir(parents=True, exist_ok=True)
    d.save(str(path))
    return path
