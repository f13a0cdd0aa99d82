"""The report page: anchors, contents after the findings, numbered figures, folded detail."""

from __future__ import annotations

import re

from gradlab.report.html import markdown_to_html, slug
from tests.helpers.images import PNG


def _page(tmp_path, markdown):
    (tmp_path / "figures").mkdir(exist_ok=True)
    (tmp_path / "figures" / "a.png").write_bytes(PNG)
    return markdown_to_html(markdown, tmp_path)


def test_contents_follow_the_findings_and_link_every_section(tmp_path):
    page = _page(tmp_path, "\n\n".join([
        "# gradlab report", "## Key findings", "- P stays flat ([Figure 1](#figure-1)).",
        "## Derivation audit", "text", "## Operating region", "![P against m](figures/a.png)",
    ]))  # fmt: skip
    toc = re.search(r'<nav class="toc">(.*?)</nav>', page).group(1)
    assert page.index('id="key-findings"') < page.index('<nav class="toc">')
    assert page.index('<nav class="toc">') < page.index('id="derivation-audit"')
    targets = re.findall(r'href="#([\w-]+)"', toc)
    assert targets == ["key-findings", "derivation-audit", "operating-region"]
    ids = set(re.findall(r'id="([\w-]+)"', page))
    for target in re.findall(r'href="#([\w-]+)"', page):
        assert target in ids, target


def test_without_findings_the_contents_follow_the_title(tmp_path):
    page = _page(tmp_path, "# Title\n\n## One\n\nx\n\n## Two\n\ny")
    assert page.index('id="title"') < page.index('<nav class="toc">') < page.index('id="one"')


def test_figures_are_numbered_in_page_order_with_their_caption(tmp_path):
    page = _page(tmp_path, "# T\n\n![First look](figures/a.png)\n\n![Second look](figures/a.png)")
    captions = re.findall(r"<figcaption><strong>Figure (\d+)\.</strong> ([^<]+)</figcaption>", page)
    assert captions == [("1", "First look"), ("2", "Second look")]
    assert page.count("data:image/png;base64,") == 2
    assert 'id="figure-1"' in page and 'id="figure-2"' in page


def test_repeated_headings_get_distinct_anchors(tmp_path):
    page = _page(tmp_path, "# T\n\n## Results\n\na\n\n## Results\n\nb")
    assert 'id="results"' in page and 'id="results-2"' in page


def test_details_fold_their_content(tmp_path):
    text = "\n".join(["# T", "", "<details>", "<summary>Claim `eq1`</summary>", "", "Body text.",
                      "", "</details>"])  # fmt: skip
    page = _page(tmp_path, text)
    assert re.search(
        r"<details>\s*<summary>Claim <code>eq1</code></summary>\s*<p>Body text.</p>\s*</details>",
        page,
    )


def test_slug():
    assert slug("Image-caption miniature (VSE++)") == "image-caption-miniature-vse"
    assert slug("**Bold** & `code`") == "bold-code"


def test_inline_tags_render_and_other_markup_is_shown_as_text(tmp_path):
    page = _page(tmp_path, "# T\n\nThe id <small>`000:eq1`</small> and <script>x</script>.")
    assert "<small><code>000:eq1</code></small>" in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "<script>" not in page


def test_a_table_renders_its_header_and_rows_never_the_separator(tmp_path):
    text = "\n".join(["# T", "", "| loss | verdict |", "| --- | --- |", "| SmoothAP | holds |",
                      "| FAPPY | fails |"])  # fmt: skip
    page = _page(tmp_path, text)
    table = re.search(r"<table>(.*?)</table>", page).group(1)
    assert re.findall(r"<th>([^<]*)</th>", table) == ["loss", "verdict"]
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1])
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in rows]
    assert cells == [["SmoothAP", "holds"], ["FAPPY", "fails"]]
    assert "---" not in page
