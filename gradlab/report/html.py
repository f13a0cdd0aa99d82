"""The report's markdown (a small dialect) as one self-contained HTML page, figures embedded."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

STYLE = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #1d2430; line-height: 1.5; }
h1 { border-bottom: 3px solid #2f6db5; padding-bottom: .3em; }
h2 { border-bottom: 1px solid #c9d3e0; padding-bottom: .2em; margin-top: 2em; color: #1f4d85; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #c9d3e0; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eef3f9; }
img { max-width: 100%; border: 1px solid #e3e8ef; margin: .5em 0; }
code { background: #f3f5f8; padding: 1px 4px; border-radius: 3px; font-size: 0.9em; }
.holds { background: #e3f4e6; } .holds-with-correction { background: #fff4d6; }
.fails { background: #fde2e1; font-weight: bold; } .inconclusive { background: #eceff3; }
"""

_VERDICT_CLASS = {
    "holds": "holds",
    "**holds with correction**": "holds-with-correction",
    "**FAILS**": "fails",
    "*inconclusive*": "inconclusive",
}


def _inline(text: str) -> str:
    text = html.escape(text, quote=False)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"(?<![\w*])\*([^*]+)\*(?![\w*])", r"<em>\1</em>", text)


def _image(alt: str, source: str, root: Path) -> str:
    path = root / source
    if path.exists():
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        source = f"data:image/png;base64,{data}"
    return f'<p><img alt="{html.escape(alt)}" src="{source}"></p>'


def _table(rows: list[str]) -> str:
    cells = [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows]
    header, body = cells[0], cells[2:]
    out = [
        "<table><thead><tr>",
        *(f"<th>{_inline(c)}</th>" for c in header),
        "</tr></thead><tbody>",
    ]
    for row in body:
        out.append("<tr>")
        for cell in row:
            css = _VERDICT_CLASS.get(cell)
            attribute = f' class="{css}"' if css else ""
            out.append(f"<td{attribute}>{_inline(cell)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def markdown_to_html(markdown: str, root: Path, title: str = "gradlab report") -> str:
    """Headings, paragraphs, tables, bullet lists and ``![alt](path)`` images (embedded)."""
    blocks: list[str] = []
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            index += 1
            continue
        heading = re.match(r"^(#{1,6}) (.*)$", line)
        image = re.match(r"^!\[([^\]]*)\]\(([^)]+)\)$", line.strip())
        if heading:
            level = len(heading.group(1))
            blocks.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
            index += 1
        elif image:
            blocks.append(_image(image.group(1), image.group(2), root))
            index += 1
        elif line.lstrip().startswith("|"):
            rows = []
            while index < len(lines) and lines[index].lstrip().startswith("|"):
                rows.append(lines[index])
                index += 1
            blocks.append(_table(rows))
        elif line.lstrip().startswith("- "):
            items = []
            while index < len(lines) and lines[index].lstrip().startswith("- "):
                items.append(f"<li>{_inline(lines[index].lstrip()[2:])}</li>")
                index += 1
            blocks.append(f"<ul>{''.join(items)}</ul>")
        else:
            paragraph = []
            while (
                index < len(lines)
                and lines[index].strip()
                and not re.match(r"^(#|\||- |!\[)", lines[index].lstrip())
            ):
                paragraph.append(lines[index].strip())
                index += 1
            blocks.append(f"<p>{_inline(' '.join(paragraph))}</p>")
    body = "\n".join(blocks)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
        f"<body>\n{body}\n</body></html>\n"
    )
