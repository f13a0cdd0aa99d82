"""The report's markdown (a small dialect) as one self-contained HTML page, figures embedded.

The dialect: ``#``-headings (each gets an anchor; ``##`` headings make the table of contents),
paragraphs, pipe tables, ``- `` bullet lists, ``*emphasis*`` and ``**strong**`` (no space just
inside the asterisks, as in CommonMark, so a product such as ``2 * 3 * 4`` stays text),
``![caption](path)`` figures (numbered in page order, "Figure N." prepended to the caption,
PNG embedded as base64), ``[text](#anchor)`` and ``[text](https://...)`` links, fenced code
blocks (shown as written, their fence's indentation taken off), a table cell's own pipe
escaped as ``\\|``, and raw
``<details>``, ``<summary>...</summary>``, ``</details>`` lines that fold what lies between
them. The table of contents is placed after a
``## Key findings`` section when the page has one, else right after the title.
"""

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
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; display: block;
        max-width: 100%; overflow-x: auto; }
th, td { border: 1px solid #c9d3e0; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eef3f9; }
img { max-width: 100%; border: 1px solid #e3e8ef; margin: .5em 0; }
code { background: #f3f5f8; padding: 1px 4px; border-radius: 3px; font-size: 0.9em;
       overflow-wrap: anywhere; }
pre { background: #f3f5f8; padding: .6em .8em; border-radius: 4px; overflow-x: auto; }
pre code { padding: 0; }
.holds { background: #e3f4e6; } .holds-with-correction { background: #fff4d6; }
.fails { background: #fde2e1; font-weight: bold; } .inconclusive { background: #eceff3; }
figure { margin: 1em 0; } figcaption { font-size: 0.9em; color: #3a4556; max-width: 900px; }
nav.toc { background: #f6f8fb; border: 1px solid #dde4ee; padding: .5em 1.2em; margin: 1em 0; }
nav.toc ol { margin: .3em 0; } details { margin: .4em 0; }
details > summary { cursor: pointer; font-weight: 600; color: #1f4d85; }
a { color: #1f5fa8; }
"""

_VERDICT_CLASS = {
    "holds": "holds",
    "**holds with a correction**": "holds-with-correction",
    "**holds with correction**": "holds-with-correction",  # Markdown of gradlab 0.2.0
    "**FAILS**": "fails",
    "*inconclusive*": "inconclusive",
}


def slug(text: str) -> str:
    """The anchor of a heading: lower case, words joined by ``-``.

    Example:
        >>> slug("Operating region (Brown et al., 2020, Eq. 1)")
        'operating-region-brown-et-al-2020-eq-1'
    """
    words = re.findall(r"[a-z0-9]+", re.sub(r"<[^>]+>", "", text).lower())
    return "-".join(words) or "section"


INLINE_TAGS = ("small", "code", "sup", "sub", "em", "strong")
"""Inline HTML tags that the markdown may use literally; every other ``<`` is shown as text."""


_IMAGE = re.compile(r"^!\[([^\]]*)\]\(([^)]+)\)$")
"""A figure line (stripped): ``![caption](path)``."""

_HEADING = re.compile(r"^(#{1,6}) (.*)$")
"""A heading line: its ``#`` marks and its text."""


def _outside_fences(markdown: str):
    """``(line, fenced)`` for each line of ``markdown``: ``fenced`` when the line opens or is
    inside a fenced code block (a closing fence line counts as outside)."""
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        yield line, fenced


_FLANKED = r"[^*\s](?:[^*]*[^*\s])?"
"""What emphasis may enclose: no asterisk, and neither starting nor ending with whitespace."""


def _inline(text: str) -> str:
    text = html.escape(text, quote=False)
    # a code span is literal: set aside before any other markup reads it (the asterisks of a
    # formula such as (1 + x)*f(x)/(tau*(1 + y)) made emphasis and vanished)
    spans: list[str] = []

    def set_aside(match: re.Match) -> str:
        spans.append(match.group(1))
        return f"\x00{len(spans) - 1}\x00"

    text = re.sub(r"`([^`]+)`", set_aside, text)
    text = re.sub(rf"&lt;(/?)({'|'.join(INLINE_TAGS)})&gt;", r"<\1\2>", text)
    text = re.sub(
        r"\[([^\]]+)\]\((#[\w-]+|https?://[^)\s]+)\)",
        # the text is escaped already: an address's & is &amp; here, escaped once, not twice
        lambda m: f'<a href="{html.escape(html.unescape(m.group(2)))}">{m.group(1)}</a>',
        text,
    )
    # CommonMark's flanking rule: no space just inside the asterisks, so 2 * 3 * 4 stays text
    text = re.sub(rf"\*\*({_FLANKED})\*\*", r"<strong>\1</strong>", text)
    text = re.sub(rf"(?<![\w*])\*({_FLANKED})\*(?![\w*])", r"<em>\1</em>", text)
    return re.sub(r"\x00(\d+)\x00", lambda m: f"<code>{spans[int(m.group(1))]}</code>", text)


def _figure(number: int, caption: str, source: str, root: Path) -> str:
    path = root / source
    if path.exists():
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        source = f"data:image/png;base64,{data}"
    return (
        f'<figure id="figure-{number}"><img alt="{html.escape(caption)}" src="{source}">'
        f"<figcaption><strong>Figure {number}.</strong> {_inline(caption)}</figcaption></figure>"
    )


def _unique(anchor: str, taken: set[str]) -> str:
    candidate, suffix = anchor, 2
    while candidate in taken:
        candidate, suffix = f"{anchor}-{suffix}", suffix + 1
    taken.add(candidate)
    return candidate


def _table_of_contents(entries: list[tuple[str, str]]) -> str:
    items = "".join(f'<li><a href="#{anchor}">{text}</a></li>' for anchor, text in entries)
    return f'<nav class="toc"><strong>Contents</strong><ol>{items}</ol></nav>'


def _table(rows: list[str]) -> str:
    # a cell's own pipe is escaped (\|, as in GitHub's tables): only the others split
    cells = [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|",
                                                               row.strip().strip("|"))]
             for row in rows]  # fmt: skip
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


def _contents_position(blocks: list[str]) -> int:
    """After the key findings (before the next ``<h2>``), else after the title, else first."""
    level2 = [i for i, block in enumerate(blocks) if block.startswith("<h2")]
    findings = [i for i in level2 if blocks[i].startswith('<h2 id="key-findings"')]
    if findings:
        later = [i for i in level2 if i > findings[0]]
        return later[0] if later else len(blocks)
    titles = [i for i, block in enumerate(blocks) if block.startswith("<h1")]
    return titles[0] + 1 if titles else 0


def _summary(line: str) -> str:
    text = re.match(r"<summary>(.*)</summary>", line).group(1)
    return f"<summary>{_inline(text)}</summary>"


def without_dead_links(markdown: str) -> str:
    """``markdown`` with each ``[text](#anchor)`` link whose anchor the page does not hold
    written as its text alone: a section that points at another one the report did not run
    (``gradlab report --only``) would link to nothing. The page holds its headings' anchors
    (:func:`slug`), ``figure-1`` to ``figure-N`` for its N figures and every
    ``<a id="...">``. Fenced code is left as written.

    Example:
        >>> page = "## Audit\\n\\nSee [the audit](#audit) and [the scenes](#scenes)."
        >>> print(without_dead_links(page))
        ## Audit
        <BLANKLINE>
        See [the audit](#audit) and the scenes.
    """
    held, figures = set(), 0
    for line, fenced in _outside_fences(markdown):
        if fenced:
            continue
        heading = _HEADING.match(line)
        if heading:
            held.add(slug(heading.group(2)))
        figures += bool(_IMAGE.match(line.strip()))
        held.update(re.findall(r'<a id="([^"]+)"', line))
    held.update(f"figure-{number}" for number in range(1, figures + 1))
    out = [line if fenced else
           re.sub(r"\[([^\]]+)\]\(#([\w-]+)\)",
                  lambda link: link.group(0) if link.group(2) in held else link.group(1), line)
           for line, fenced in _outside_fences(markdown)]  # fmt: skip
    return "\n".join(out) + ("\n" if markdown.endswith("\n") else "")


def markdown_page(markdown: str) -> str:
    """``markdown`` as ``summary.md`` holds it, for a Markdown viewer: each figure numbered as
    :func:`markdown_to_html` numbers it, an ``<a id="figure-N"></a>`` anchor before it and its
    caption under it as ``**Figure N.** caption``; and every heading that a ``[text](#anchor)``
    link of the page targets gets the anchor as written (``<a id="..."></a>`` before it), since
    viewers derive a heading's own anchor each by its own rule (GitHub keeps a ``-`` for every
    space, so ``A & B`` becomes ``a--b``). Fenced code is left as written.

    Example:
        >>> print(markdown_page("# R\\n\\nSee [Figure 1](#figure-1).\\n\\n![Plot](figures/a.png)"))
        # R
        <BLANKLINE>
        See [Figure 1](#figure-1).
        <BLANKLINE>
        <a id="figure-1"></a>
        ![Plot](figures/a.png)
        <BLANKLINE>
        **Figure 1.** Plot
    """
    targets = set(re.findall(r"\]\(#([\w-]+)\)", markdown))
    out: list[str] = []
    figures = 0
    for line, fenced in _outside_fences(markdown):
        image = None if fenced else _IMAGE.match(line.strip())
        heading = None if fenced else _HEADING.match(line)
        if image:
            figures += 1
            indent = line[: len(line) - len(line.lstrip())]
            out += [f'{indent}<a id="figure-{figures}"></a>', line, "",
                    f"{indent}**Figure {figures}.** {image.group(1)}"]  # fmt: skip
            continue
        if heading and slug(heading.group(2)) in targets:
            out += [f'<a id="{slug(heading.group(2))}"></a>', ""]
        out.append(line)
    return "\n".join(out) + ("\n" if markdown.endswith("\n") else "")


def markdown_to_html(markdown: str, root: Path, title: str = "gradlab report") -> str:
    """The page for ``markdown`` (the dialect of the module docstring), figures from ``root``.

    Example:
        >>> text = "\\n\\n".join(["# R", "## Key findings", "- a", "## Audit", "Text."])
        >>> page = markdown_to_html(text, Path("."))
        >>> page.index("Key findings") < page.index('class="toc"') < page.index('id="audit"')
        True
    """
    blocks: list[str] = []
    contents: list[tuple[str, str]] = []
    anchors: set[str] = set()
    figures = 0
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            index += 1
            continue
        heading = _HEADING.match(line)
        image = _IMAGE.match(line.strip())
        raw = re.match(r"^\s*(</?details>|<details [^>]*>|<summary>.*</summary>)\s*$", line)
        if heading:
            level, text = len(heading.group(1)), heading.group(2)
            anchor = _unique(slug(text), anchors)
            if level == 2:
                contents.append((anchor, _inline(text)))
            blocks.append(f'<h{level} id="{anchor}">{_inline(text)}</h{level}>')
            index += 1
        elif line.lstrip().startswith("```"):  # a fenced block, to its closing fence
            indent = len(line) - len(line.lstrip())
            index += 1
            code = []
            while index < len(lines) and not lines[index].lstrip().startswith("```"):
                text = lines[index]
                code.append(text[indent:] if not text[:indent].strip() else text.lstrip())
                index += 1
            index += 1  # the closing fence
            blocks.append(f"<pre><code>{html.escape(chr(10).join(code), quote=False)}"
                          "</code></pre>")
        elif raw:
            blocks.append(raw.group(1) if "summary" not in raw.group(1) else _summary(raw.group(1)))
            index += 1
        elif image:
            figures += 1
            blocks.append(_figure(figures, image.group(1), image.group(2), root))
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
        else:  # text: this line (whatever it starts with), then lines that start no block
            paragraph = [line.strip()]
            index += 1
            while (
                index < len(lines)
                and lines[index].strip()
                and not re.match(r"^(#|\||- |!\[|</?details|<summary|```)", lines[index].lstrip())
            ):
                paragraph.append(lines[index].strip())
                index += 1
            blocks.append(f"<p>{_inline(' '.join(paragraph))}</p>")
    if len(contents) > 1:
        blocks.insert(_contents_position(blocks), _table_of_contents(contents))
    body = "\n".join(blocks)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
        f"<body>\n{body}\n</body></html>\n"
    )
