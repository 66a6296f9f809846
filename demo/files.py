"""Small real document files: one-page PDFs and CSV packing lists, written under STORAGE_DIR."""
import os
from pathlib import Path


def pdf(title, lines):
    """A valid one-page PDF showing a title and lines of text (Helvetica, A4)."""
    def escape(text):
        text = text.encode("latin-1", "replace").decode("latin-1")
        return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    rows = [f"BT /F1 16 Tf 56 780 Td ({escape(title)}) Tj ET"]
    for i, line in enumerate(lines[:48]):
        rows.append(f"BT /F1 10 Tf 56 {750 - 14 * i} Td ({escape(line)}) Tj ET")
    stream = "\n".join(rows).encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 4 0 R >> >> "
        b"/Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def csv_text(header, rows):
    """CSV bytes (UTF-8, comma separated, quoted where needed)."""
    def cell(value):
        text = "" if value is None else str(value)
        return f'"{text.replace(chr(34), chr(34) * 2)}"' if any(c in text for c in ',"\n') else text

    lines = [",".join(cell(v) for v in header)] + [",".join(cell(v) for v in row) for row in rows]
    return ("\n".join(lines) + "\n").encode("utf-8")


def write(storage_dir, key, content):
    """Write a file under the storage folder (key is the relative path); returns its size."""
    path = Path(storage_dir) / key
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(content)
    os.replace(tmp, path)
    return len(content)


def safe_name(filename):
    """A file name fit for a storage key (no separators or spaces)."""
    return "".join(c if c.isalnum() or c in ".-_" else "_" for c in filename)
