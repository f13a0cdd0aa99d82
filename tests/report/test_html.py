"""The report page: anchors, contents after the findings, numbered figures, folded detail."""

from __future__ import annotations

import base64
import re
import threading

import pytest

from gradlab.report.html import markdown_page, markdown_to_html, slug
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


def test_a_table_without_spaces_at_its_pipes_keeps_every_cell_whole(tmp_path):
    # only the row's outer pipes go: a cell's own first or last letters (X here) stay
    text = "\n".join(["|X|mode|", "|-|-|", "|Xi|maX|", "|XX|X|"])
    page = _page(tmp_path, text)
    table = re.search(r"<table>(.*?)</table>", page).group(1)
    assert re.findall(r"<th>([^<]*)</th>", table) == ["X", "mode"]
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1])
    assert [re.findall(r"<td>([^<]*)</td>", row) for row in rows] == [["Xi", "maX"], ["XX", "X"]]


def _within_a_minute(markdown, root):
    """The page, or an AssertionError if it is not done in a minute (it used to loop forever)."""
    pages = []
    worker = threading.Thread(target=lambda: pages.append(markdown_to_html(markdown, root)),
                              daemon=True)  # fmt: skip
    worker.start()
    worker.join(60)
    assert pages, f"markdown_to_html did not finish on {markdown!r}"
    return pages[0]


@pytest.mark.parametrize(
    "line, paragraph",
    [("#1 is the best m", "#1 is the best m"),
     ("![P](figures/a.png) and more", "![P](figures/a.png) and more"),
     ("<summary>open", "&lt;summary&gt;open"),
     ("</details> closed", "&lt;/details&gt; closed")],
)  # fmt: skip
def test_a_line_that_starts_no_block_is_text_of_its_paragraph(tmp_path, line, paragraph):
    page = _within_a_minute(f"# T\n\n{line}\nnext line\n\nAfter.", tmp_path)
    assert re.findall(r"<p>(.*?)</p>", page) == [f"{paragraph} next line", "After."]


def test_verdict_cells_are_coloured_and_other_cells_not(tmp_path):
    text = "\n".join(["| claim | verdict |", "|---|---|", "| a | holds |",
                      "| b | **holds with a correction** |", "| c | **FAILS** |",
                      "| d | *inconclusive* |", "| e | holds mostly |",
                      "| f | **holds with correction** |"])  # fmt: skip (f: as 0.2.0 wrote it)
    page = _page(tmp_path, text)
    verdicts = re.findall(r"<td( class=\"[\w-]+\")?>(.*?)</td>", page)[1::2]
    assert verdicts == [
        (' class="holds"', "holds"),
        (' class="holds-with-correction"', "<strong>holds with a correction</strong>"),
        (' class="fails"', "<strong>FAILS</strong>"),
        (' class="inconclusive"', "<em>inconclusive</em>"),
        ("", "holds mostly"),
        (' class="holds-with-correction"', "<strong>holds with correction</strong>"),
    ]
    assert "<th>claim</th><th>verdict</th>" in page


def test_inline_markup_links_code_bold_and_emphasis(tmp_path):
    text = ('See [the audit](#audit), [docs](https://example.org/a?b=1&c="2") and '
            "[no](javascript:alert). Use `x*y*z` **bold** *em* but a*b*c stays; "
            'quotes "stay".')  # fmt: skip
    (paragraph,) = re.findall(r"<p>(.*?)</p>", _page(tmp_path, "# T\n\n" + text))
    assert paragraph == (
        'See <a href="#audit">the audit</a>, '
        '<a href="https://example.org/a?b=1&amp;c=&quot;2&quot;">docs</a> and '
        "[no](javascript:alert). "
        "Use <code>x*y*z</code> <strong>bold</strong> <em>em</em> but a*b*c stays; "
        'quotes "stay".'
    )


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("The product 2 * 3 * 4 is 24.", "The product 2 * 3 * 4 is 24."),
        ("Then 2 ** 3 ** 2 is large.", "Then 2 ** 3 ** 2 is large."),
        ("A * b* and *c * d.", "A * b* and *c * d."),
        ("Mixed 2 * 3 and *em* here.", "Mixed 2 * 3 and <em>em</em> here."),
        ("Both *one word* and **two words** mark.",
         "Both <em>one word</em> and <strong>two words</strong> mark."),
        ("Single *x* letters.", "Single <em>x</em> letters."),
    ],
)  # fmt: skip
def test_asterisks_with_space_inside_are_text_not_emphasis(tmp_path, text, shown):
    """CommonMark's flanking rule: an opening ``*`` is not followed by a space, a closing one
    not preceded by one, so the asterisks of a product stay as they are."""
    (paragraph,) = re.findall(r"<p>(.*?)</p>", _page(tmp_path, "# T\n\n" + text))
    assert paragraph == shown

def test_a_code_span_is_literal_whatever_asterisks_links_or_tags_it_holds(tmp_path):
    # the audit's formulas lost their multiplications in the HTML report: the asterisks of
    # `...)))*Derivative(f(x), x)/(tau*(1 + ...` were read as emphasis inside the code span
    formula = "exp(x)/(1 + exp(x)))*Derivative(f(x), x)/(tau*(1 + exp(-x)))"
    text = (f"See `{formula}`, `**not bold**`, `[not](#a-link)` and `<em>x</em>`; "
            "then *em* and [a link](#a).")
    (paragraph,) = re.findall(r"<p>(.*?)</p>", _page(tmp_path, "# T\n\n" + text))
    assert paragraph == (f"See <code>{formula}</code>, <code>**not bold**</code>, "
                         "<code>[not](#a-link)</code> and <code>&lt;em&gt;x&lt;/em&gt;</code>; "
                         'then <em>em</em> and <a href="#a">a link</a>.')


def test_headings_of_every_level_get_anchors_and_only_level_two_is_listed(tmp_path):
    page = _page(tmp_path, "# Top\n\n## A b\n\n### Sub `x`\n\n###### Six\n\n####### Seven\n\n## C")
    assert re.findall(r"<h(\d) id=\"([\w-]+)\">(.*?)</h\d>", page) == [
        ("1", "top", "Top"), ("2", "a-b", "A b"), ("3", "sub-x", "Sub <code>x</code>"),
        ("6", "six", "Six"), ("2", "c", "C"),
    ]  # fmt: skip
    assert "<p>####### Seven</p>" in page
    toc = re.search(r'<nav class="toc"><strong>Contents</strong><ol>(.*?)</ol></nav>', page)
    assert toc.group(1) == '<li><a href="#a-b">A b</a></li><li><a href="#c">C</a></li>'


def test_three_equal_headings_count_on(tmp_path):
    page = _page(tmp_path, "# R\n\n## R\n\n## R\n\n### R")
    assert re.findall(r'id="([\w-]+)"', page) == ["r", "r-2", "r-3", "r-4"]


def test_the_contents_need_two_sections_and_go_where_the_page_allows(tmp_path):
    assert 'class="toc"' not in _page(tmp_path, "# T\n\n## Only\n\ntext")
    # findings last: the contents close the page
    page = _page(tmp_path, "# T\n\n## A\n\na\n\n## Key findings\n\n- f")
    assert page.index("<ul><li>f</li></ul>") < page.index('<nav class="toc">')
    assert page.index('<nav class="toc">') < page.index("</body>")
    # findings first among several: before the section after them, not later
    page = _page(tmp_path, "# T\n\n## Key findings\n\n- f\n\n## B\n\nb\n\n## C\n\nc")
    assert page.index("<ul><li>f</li></ul>") < page.index('<nav class="toc">')
    assert page.index('<nav class="toc">') < page.index('id="b"')
    # no title: the contents come first
    body = _page(tmp_path, "## A\n\na\n\n## B\n\nb").split("<body>\n")[1]
    assert body.startswith('<nav class="toc">')


def test_a_figure_whose_file_is_missing_keeps_its_path_and_a_safe_caption(tmp_path):
    page = _page(tmp_path, '# T\n\n![Say "hi" & <b>`P`</b>](figures/none.png)')
    alt = "Say &quot;hi&quot; &amp; &lt;b&gt;`P`&lt;/b&gt;"
    assert f'<img alt="{alt}" src="figures/none.png">' in page
    assert '<strong>Figure 1.</strong> Say "hi" &amp; &lt;b&gt;<code>P</code>&lt;/b&gt;' in page
    embedded = _page(tmp_path, "# T\n\n![a](figures/a.png)")
    expected = "data:image/png;base64," + base64.b64encode(PNG).decode("ascii")
    assert f'src="{expected}"' in embedded


def test_lists_paragraphs_details_and_the_title(tmp_path):
    text = "\n".join(["# T", "first line", "  second line", "", "- one `a`", "  - two", "",
                      '<details open class="x">', "<summary>More **b**</summary>", "inner",
                      "</details>", "  | k |", "  |---|", "  | v |"])  # fmt: skip
    page = markdown_to_html(text, tmp_path, title="Mine <&>")
    assert "<title>Mine &lt;&amp;&gt;</title>" in page
    body = page.split("<body>\n")[1].split("\n</body>")[0].split("\n")
    assert body == [
        '<h1 id="t">T</h1>', "<p>first line second line</p>",
        "<ul><li>one <code>a</code></li><li>two</li></ul>",
        '<details open class="x">', "<summary>More <strong>b</strong></summary>", "<p>inner</p>",
        "</details>",
        "<table><thead><tr><th>k</th></tr></thead><tbody><tr><td>v</td></tr></tbody></table>",
    ]  # fmt: skip
    assert page.startswith("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>")
    assert page.endswith("</body></html>\n")


def test_slug_of_markup_and_of_nothing():
    assert slug("<small>Extra</small> Table 2") == "extra-table-2"
    assert slug("!!! ---") == "section"


def test_a_figure_an_indented_list_and_text_without_blank_lines_between(tmp_path):
    page = markdown_to_html("![F](figures/none.png)\nText after.\n  - a\n- b", tmp_path)
    body = page.split("<body>\n")[1].split("\n</body>")[0].split("\n")
    assert body[1:] == ["<p>Text after.</p>", "<ul><li>a</li><li>b</li></ul>"]
    assert body[0].startswith('<figure id="figure-1">')
    assert "<title>gradlab report</title>" in page  # the default title


def test_an_escaped_pipe_stays_inside_its_cell(tmp_path):
    # a claim "every printed AP fits its |P|" was cut at its pipes into cells past the header
    text = "\n".join(["| claim | statement |", "| --- | --- |",
                      r"| `eq2` | tie-aware AP (k = \|S\|) |"])  # fmt: skip
    table = re.search(r"<table>(.*?)</table>", _page(tmp_path, text)).group(1)
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1])
    assert [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows] == [
        ["<code>eq2</code>", "tie-aware AP (k = |S|)"]]


def test_a_fenced_block_keeps_its_lines_in_a_pre_block(tmp_path):
    # printed pseudocode ran into one line with its backticks shown, a # comment swallowing
    # the statements after it
    text = "\n".join(["- printed:", "", "```", "s1 = repeat(scores, m, 0) # m x m", "s2 = s1.T",
                      "```", "", "- detail: first", "", "  ```text", "  trace <line>",
                      "    indented", "  ```", "", "After."])  # fmt: skip
    page = _page(tmp_path, text)
    assert re.findall(r"<pre><code>(.*?)</code></pre>", page, re.S) == [
        "s1 = repeat(scores, m, 0) # m x m\ns2 = s1.T", "trace &lt;line&gt;\n  indented"]
    assert "```" not in page and "<p>After.</p>" in page


def test_a_fenced_block_keeps_quotes_a_less_indented_line_and_what_follows_it(tmp_path):
    # quotes stay quotes in a pre block; a line less indented than its fence loses only its
    # own indentation; the line right after the closing fence is the next paragraph; a fence
    # never closed runs to the end of the page instead of failing
    text = "\n".join(["- item:", "", "  ```", '  say("hi")', " short", "  ```", "Next.", "",
                      "```", "tail = 'open'"])  # fmt: skip
    page = _page(tmp_path, text)
    assert re.findall(r"<pre><code>(.*?)</code></pre>", page, re.S) == [
        'say("hi")\nshort', "tail = 'open'"]
    assert "<p>Next.</p>" in page


def test_summary_md_numbers_each_figure_with_its_anchor_and_caption():
    text = ("# R\n\nSee [Figure 2](#figure-2).\n\n![First plot](figures/a.png)\n\n"
            "  ![Second plot](figures/b.png)  \n\nAfter.\n")  # fmt: skip
    assert markdown_page(text) == (
        "# R\n\nSee [Figure 2](#figure-2).\n\n"
        '<a id="figure-1"></a>\n![First plot](figures/a.png)\n\n**Figure 1.** First plot\n\n'
        '  <a id="figure-2"></a>\n  ![Second plot](figures/b.png)  \n\n'
        "  **Figure 2.** Second plot\n\nAfter.\n")  # fmt: skip


def test_summary_md_anchors_only_the_headings_a_link_targets_and_leaves_fenced_code():
    text = "\n".join([
        "# Report", "", "Read [the audit](#audit-a-b) and [nothing](#nowhere).", "",
        "## Audit: A & B", "", "## Other", "", "```", "# Audit: A & B",
        "![not a figure](figures/c.png)", "```", "", "![A figure](figures/d.png)",
    ])  # fmt: skip
    assert markdown_page(text) == "\n".join([
        "# Report", "", "Read [the audit](#audit-a-b) and [nothing](#nowhere).", "",
        '<a id="audit-a-b"></a>', "", "## Audit: A & B", "", "## Other", "", "```",
        "# Audit: A & B", "![not a figure](figures/c.png)", "```", "",
        '<a id="figure-1"></a>', "![A figure](figures/d.png)", "", "**Figure 1.** A figure",
    ])  # fmt: skip


def test_summary_md_leaves_an_indented_fence_as_written():
    text = "- item\n\n  ```\n  ![not a figure](figures/c.png)\n  ```\n"
    assert markdown_page(text) == text


def test_a_link_to_a_section_the_page_lacks_is_written_as_its_text():
    # gradlab report --only tie_aware: its section linked to the audit, which did not run
    from gradlab.report.html import without_dead_links

    page = ("# Report\n\n## Harmonic sums (He et al., 2018)\n\nwhich the [derivation audit]"
            "(#derivation-audit) corrects; see [Figure 1](#figure-1), [Figure 2](#figure-2), "
            "[above](#harmonic-sums-he-et-al-2018) and [the note](#note).\n\n"
            '<a id="note"></a>\n\n![A plot](figures/a.png)\n\n```\n[kept](#nowhere)\n```\n')
    kept = without_dead_links(page)
    assert ("which the derivation audit corrects; see [Figure 1](#figure-1), Figure 2, "
            "[above](#harmonic-sums-he-et-al-2018) and [the note](#note).") in kept
    assert "[kept](#nowhere)" in kept  # fenced code is left as written
    assert without_dead_links(kept) == kept
    full = page.replace("# Report\n", "# Report\n\n## Derivation audit\n")
    assert "[derivation audit](#derivation-audit)" in without_dead_links(full)


def test_dead_links_are_read_past_fences_with_figures_counted_from_one():
    from gradlab.report.html import without_dead_links

    # a heading after fenced code is held; one figure holds figure-1 alone (no figure-0)
    page = ("# R\n\n```\n# not a heading\n```\n\n## Later\n\n![A](figures/a.png)\n\n"
            "[up](#later) [f0](#figure-0) [f1](#figure-1) [f2](#figure-2) "
            "[code](#not-a-heading)")
    assert without_dead_links(page).splitlines()[-1] == "[up](#later) f0 [f1](#figure-1) f2 code"
    # the page's last newline is kept, and none is added
    assert without_dead_links(page).endswith("code") and not page.endswith("\n")
    assert without_dead_links(page + "\n") == without_dead_links(page) + "\n"
