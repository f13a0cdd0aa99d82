"""The docs site: ``mkdocs build --strict`` passes (no broken link, reference or anchor), every
public name has its API entry, and user-facing text cites papers, not internal ids."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import gradlab
import gradlab.functional
import gradlab.monitor
import gradlab.symbolic
from tools import docs_hooks
from tools.docs_check import build_site
from tools.readme_blocks import ROOT

PUBLIC = (gradlab, gradlab.functional, gradlab.monitor, gradlab.symbolic)
API_PAGES = {"gradlab": "api/gradlab", "gradlab.functional": "api/functional",
             "gradlab.monitor": "api/monitor", "gradlab.symbolic": "api/symbolic"}  # fmt: skip
INTERNAL_IDS = re.compile(r"seeds? `?00[0-4]|issue [0-9]+", re.IGNORECASE)
"""What a reader cannot resolve: the audit's document keys and the project's issue numbers."""
AUDIT_KEYS = re.compile(r"(?<![\w.])00[0-4](?![\w.])|\b00[0-4]_[0-9a-f]{16}\b")
"""The audit's document keys in rendered output: ``000_e0f8...``, or their number alone
(``000:eq1``, a ``000`` column) but not inside another number (``0.000``, ``1000``)."""
USER_FACING = ("README.md", "docs", "gradlab", "examples")
"""Files whose text a user reads (README, docs, every docstring and message of the package)."""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built by ``mkdocs build --strict`` into a temporary folder."""
    folder = tmp_path_factory.mktemp("site")
    completed = build_site(folder)
    assert completed.returncode == 0, completed.stderr[-4000:]
    return folder


def _ids(page: Path) -> set[str]:
    return set(re.findall(r'id="([^"]+)"', page.read_text(encoding="utf-8")))


@pytest.mark.slow
def test_the_strict_build_writes_every_page_of_the_nav(site):
    import yaml

    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)

    def leaves(entries):
        for entry in entries:
            for value in entry.values():
                yield from leaves(value) if isinstance(value, list) else [value]

    for source in leaves(config["nav"]):
        built = "index.html" if source == "index.md" else source.removesuffix(".md") + "/index.html"
        assert (site / built).is_file(), source


def _entries(page: Path) -> dict[str, str]:
    """Each documented object's id on a built API page -> the HTML up to the next entry."""
    html = page.read_text(encoding="utf-8")
    heads = list(re.finditer(r'<h[2-4] id="([\w.]+)" class="doc doc-heading"', html))
    ends = [m.start() for m in heads[1:]] + [len(html)]
    return {m[1]: html[m.end():end] for m, end in zip(heads, ends, strict=True)}


@pytest.mark.slow
@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_every_public_name_has_an_api_entry_with_a_summary(site, module):
    entries = _entries(site / API_PAGES[module.__name__] / "index.html")
    missing, silent = [], []
    for name in module.__all__:
        # A function defined in a module of its own name is documented at its full path.
        found = [entries[key] for key in (f"{module.__name__}.{name}",
                                          f"{module.__name__}.{name}.{name}") if key in entries]
        if not found:
            missing.append(name)
        elif "<p>" not in found[0] and not name.isupper() and not name.startswith("__"):
            silent.append(name)  # constants show their value instead of a summary
    assert (missing, silent) == ([], [])


@pytest.mark.slow
def test_the_functional_page_opens_on_a_map_naming_every_public_name_once(site):
    # the map of gradlab.functional by question, as its page (and help()) shows it: above the
    # first entry, each public name in code once; a module's other names are named after it
    html = (site / API_PAGES["gradlab.functional"] / "index.html").read_text(encoding="utf-8")
    start = html.index("By the question they answer")
    intro = html[start:html.index('class="doc doc-heading"', start)]
    mapped = intro[: intro.rindex("<p>", 0, intro.index("share their module"))]
    named = re.findall(r"<code>([A-Za-z_]\w*)</code>", mapped)
    assert sorted(named) == sorted(gradlab.functional.__all__)  # each once, and no other
    assert "DEFAULT_ABSOLUTE_THRESHOLD" in intro


@pytest.mark.slow
def test_no_page_shows_a_raw_sphinx_role_or_a_fold_of_raw_markdown(site):
    # the API pages showed ":func:`~gradlab.x`" verbatim, and the audit's and the mutation
    # table's folds one block of raw "- `eq1` ..." and "| `backbones` | ..." text
    roles, raw_folds = [], []
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        roles += [f"{page.relative_to(site)}: {match}"
                  for match in re.findall(r":(?:mod|class|func|meth|attr|data):<code>", html)]
        for fold in re.findall(r"<details[^>]*>(.*?)</details>", html, re.DOTALL):
            if re.search(r"(^|\n)\s*(- `|\| `)", fold):
                raw_folds.append(f"{page.relative_to(site)}: {fold[:80]!r}")
    assert (roles, raw_folds) == ([], [])
    audit = (site / "audit" / "index.html").read_text(encoding="utf-8")
    folds = re.findall(r"<details[^>]*>(.*?)</details>", audit, re.DOTALL)
    assert folds and all("<li>" in fold for fold in folds)
    # SymPy's * and ** in the claims' formulas became italics and bold: "R_P(x) = 32 + 2 + 4"
    formulas = [f for fold in folds for f in re.findall(r"R_P\(x\) = [^;)]*", fold)]
    assert formulas and any("*x**7" in formula and re.fullmatch(r"R_P\(x\) = [-+*/ x0-9]+",
                                                                  formula) for formula in formulas)
    assert not any(re.search(r"<(em|strong)>", fold) for fold in folds)
    monitor = (site / "api" / "monitor" / "index.html").read_text(encoding="utf-8")
    assert 'href="#gradlab.monitor.Quantity"><code>Quantity</code></a>' in monitor


@pytest.mark.slow
def test_no_api_page_breaks_a_docstring_into_a_quote_or_raw_literals(site):
    # a docstring line that starts with "> 0" became a block quote, and the rest of
    # symbolic_equality's text showed its ``literals`` raw, code and prose swapped
    broken = []
    for page in (site / "api").rglob("index.html"):
        html = page.read_text(encoding="utf-8")
        prose = re.sub(r"<pre.*?</pre>|<code>.*?</code>", "", html, flags=re.DOTALL)
        broken += [f"{page.relative_to(site)}: {text[:60]!r}"
                   for text in re.findall(r"<blockquote>(.*?)</blockquote>", prose, re.DOTALL)]
        broken += [f"{page.relative_to(site)}: {prose[max(0, m.start() - 40):m.end() + 20]!r}"
                   for m in re.finditer("``|::</p>", prose)]  # "Usage::" as typed
    assert broken == []


def test_the_site_hooks_show_a_literal_block_marker_as_one_colon():
    page = SimpleNamespace(file=SimpleNamespace(src_uri="api/integrations.md"))
    html = ('<p>Usage::</p>\n<div class="highlight"><pre>x</pre></div>'
            "<p>a::b and c::</p><p>next</p>")
    assert docs_hooks.on_page_content(html, page, None, None) == (
        '<p>Usage:</p>\n<div class="highlight"><pre>x</pre></div>'
        "<p>a::b and c::</p><p>next</p>")  # no code block follows: left as written


def test_the_site_hooks_parse_folds_and_turn_roles_into_references():
    page = SimpleNamespace(file=SimpleNamespace(src_uri="api/monitor.md"))
    markdown = "a\n<details><summary>Per module</summary>\n\n- `x`\n</details>\n<details>\n"
    assert docs_hooks.on_page_markdown(markdown, page, None, None).split("\n") == [
        "a", '<details markdown="1">', "<summary>Per module</summary>", "", "- `x`",
        "</details>", '<details markdown="1">', ""]
    html = (":mod:<code>~gradlab.monitor.batch</code>, :meth:<code>BatchView.buffer</code> "
            "and :func:<code>gradlab.functional.smooth_ap</code>; not <code>:x:</code>")
    assert docs_hooks.on_page_content(html, page, None, None) == (
        '<autoref identifier="gradlab.monitor.batch" optional><code>batch</code></autoref>, '
        '<autoref identifier="gradlab.monitor.BatchView.buffer" optional>'
        "<code>BatchView.buffer</code></autoref> and "
        '<autoref identifier="gradlab.functional.smooth_ap" optional>'
        "<code>gradlab.functional.smooth_ap</code></autoref>; not <code>:x:</code>")
    home = SimpleNamespace(file=SimpleNamespace(src_uri="api/gradlab.md"))
    assert 'identifier="gradlab.Monitor"' in docs_hooks.on_page_content(
        ":class:<code>Monitor</code>", home, None, None)


def test_the_losses_page_pairs_every_loss_with_its_function():
    page = (ROOT / "docs" / "losses.md").read_text()
    table = page[page.index("| module"):page.index("\n\n", page.index("| module"))]
    losses = [name for name in gradlab.__all__ if isinstance(getattr(gradlab, name), type)
              and issubclass(getattr(gradlab, name), gradlab.RankingLoss)
              and name != "RankingLoss"]  # fmt: skip
    for name in losses:
        assert f"[gradlab.{name}]" in table, name
    for function in re.findall(r"\[gradlab\.functional\.([\w.]+)\]", table):
        assert hasattr(gradlab.functional, function.split(".")[-1]), function


def _user_facing_files() -> list[Path]:
    files = []
    for entry in USER_FACING:
        path = ROOT / entry
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += [p for p in sorted(path.rglob("*")) if p.suffix in (".md", ".py")]
    return files


def test_user_facing_text_cites_papers_not_internal_ids():
    hits = []
    for path in _user_facing_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if INTERNAL_IDS.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    assert hits == []


def test_the_internal_id_pattern_finds_what_it_should():
    assert INTERNAL_IDS.search("as Seed 002 reports") and INTERNAL_IDS.search("(issue 13)")
    assert INTERNAL_IDS.search("SmoothAP (seeds 000-002)")
    assert INTERNAL_IDS.search("<small>seed `000_e0f8edb24a02ffe3`</small>. holds: 8")
    assert not INTERNAL_IDS.search("3 seeds, seed spread; Brown et al. (2020), Eq. 1")


def test_the_audit_key_pattern_finds_keys_but_not_numbers():
    for text in ("| `000:eq1` | holds |", "  001  Bleeker & de Rijke", "`004_e426679a66883031`"):
        assert AUDIT_KEYS.search(text), text
    for text in ("error 0.000 at 1000 points", "x_001 and 003x", "Eq. 4; 2022"):
        assert not AUDIT_KEYS.search(text), text


def test_the_audits_outputs_cite_papers_not_internal_ids():
    """What `gradlab audit` prints and its markdown (the report's audit section) name each paper
    by authors, year and title, on the committed records of every audited paper."""
    from gradlab.symbolic.audit import format_markdown, format_table
    from gradlab.symbolic.seeds import SEEDS

    records = json.loads((ROOT / "benchmarks/results/audit.json").read_text())
    assert {record["seed"] for record in records} == set(SEEDS)
    for name, text in (("table", format_table(records)), ("markdown", format_markdown(records))):
        hits = [line for line in text.splitlines()
                if INTERNAL_IDS.search(line) or AUDIT_KEYS.search(line)]  # fmt: skip
        assert [line.strip()[:100] for line in hits] == [], name
        for seed in SEEDS.values():
            assert f"{seed.authors} ({seed.year}). {seed.title}" in " ".join(text.split()), name


def test_the_citation_metadata_names_this_version_and_license():
    import yaml

    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    assert (citation["version"], citation["license"]) == (gradlab.__version__, "MIT")
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    readme = (ROOT / "README.md").read_text()
    assert f"version = {{{gradlab.__version__}}}" in readme, "README's BibTeX names another version"


@pytest.mark.slow
def test_every_link_of_the_readme_reaches_a_file_and_its_anchor(site):
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert len(links) >= 10
    broken = []
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        path, _, anchor = link.partition("#")
        if not (ROOT / path).is_file():
            broken.append(link)
        elif anchor:  # a docs page's anchor, as the built site names it
            page = site / Path(path).relative_to("docs").with_suffix("") / "index.html"
            if anchor not in _ids(page):
                broken.append(link)
    assert broken == []


def test_the_getting_started_monitor_runs_as_pasted_and_logs_the_default_schedule(
    tmp_path, monkeypatch
):
    # it used model, loader and optimizer without defining them: pasted, a NameError
    (block,) = _page_blocks("getting-started.md", "## A first Monitor")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block, "docs/getting-started.md", "exec"), namespace)
    records = [json.loads(line) for line in
               (tmp_path / "runs" / "exp1" / "metrics.jsonl").read_text().splitlines()]
    last = len(namespace["loader"]) - 1
    # the default schedule: steps 0-9, every 10th, and the last (added by close())
    assert [r["step"] for r in records if "loss" in r] == [*range(10), *range(10, last, 10),
                                                             last]  # fmt: skip


def test_the_getting_started_loss_runs_and_gives_the_loop_references_loss():
    from tests.reference.smooth_ap_loops import in_batch_smooth_ap

    page = (ROOT / "docs" / "getting-started.md").read_text()
    section = page[page.index("## A first loss"):]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    namespace: dict = {}
    exec(compile(code, "docs/getting-started.md", "exec"), namespace)
    embeddings, labels = namespace["embeddings"], namespace["labels"]
    assert embeddings.grad is not None and embeddings.grad.abs().sum() > 0
    aps = in_batch_smooth_ap(embeddings.tolist(), labels.tolist(), 0.01, include_query=False)
    assert abs(namespace["loss"].item() - (1 - sum(aps) / len(aps))) < 1e-5  # float32 loss
    # The score-matrix call: NT-Xent in both directions (i2t + t2i), one positive per query on
    # the diagonal, as a float64 loop of -log softmax.
    scores = namespace["scores"].detach().double().tolist()
    temperature, size = 0.1, len(scores)
    expected = 0.0
    for rows in (scores, [list(column) for column in zip(*scores, strict=True)]):
        terms = [math.log(sum(math.exp(s / temperature) for s in row)) - row[q] / temperature
                 for q, row in enumerate(rows)]  # fmt: skip
        expected += sum(terms) / size
    assert abs(namespace["ntxent"].item() - expected) < 1e-4 * max(1.0, expected)



def _page_blocks(page: str, heading: str) -> list[str]:
    text = (ROOT / "docs" / page).read_text()
    section = text[text.index(heading):]
    section = section[:section.find("\n## ", 1)] if "\n## " in section[1:] else section
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def test_the_losses_pages_blocks_run_as_pasted_and_say_what_they_compute(tmp_path, monkeypatch):
    from tests.reference.smooth_ap_loops import in_batch_smooth_ap

    simclr, watched = _page_blocks("losses.md", "NT-Xent takes every column")
    namespace: dict = {}
    exec(compile(simclr, "docs/losses.md", "exec"), namespace)
    loss = namespace["loss"]
    # SimCLR's Eq. 1 as a float64 loop: each view against every other view, its partner positive
    scores, n = namespace["scores"].double().tolist(), namespace["n"]
    terms = []
    for i, row in enumerate(scores):
        others = [s / 0.5 for j, s in enumerate(row) if j != i]
        terms.append(math.log(sum(math.exp(v) for v in others)) - row[(i + n) % (2 * n)] / 0.5)
    assert abs(loss.item() - sum(terms) / len(terms)) < 1e-5
    # Watched as it stands, the masked diagonal is one more negative of each view (6 of 7
    # active); watched through a function of one's own as in_batch_scores, it is left out.
    monkeypatch.chdir(tmp_path)
    with gradlab.Monitor("as_it_stands", preset="full", every=1) as monitor:
        scores = (namespace["views"].detach() @ namespace["views"].T).requires_grad_()
        monitor.watch(namespace["simclr"])(scores.masked_fill(namespace["own"], -1e4),
                                           namespace["partners"]).backward()  # fmt: skip
        as_it_stands = monitor.step()
    assert as_it_stands["anatomy_i2t_active_negative_share"] == pytest.approx(6 / 7)
    exec(compile(watched, "docs/losses.md", "exec"), namespace)
    record = namespace["record"]
    assert record["anatomy_active_negative_share"] == 1.0 and "p_without_query" in record
    assert not any(key.startswith("anatomy_i2t") for key in record)
    assert record["loss"] == pytest.approx(loss.item(), rel=1e-6)  # the same loss
    blocks = _page_blocks("losses.md", "## SmoothAP in detail")
    smooth_ap, reproduction = blocks[0], blocks[-1]
    namespace = {}
    exec(compile(smooth_ap, "docs/losses.md", "exec"), namespace)
    assert namespace["loss"].shape == () and torch.isfinite(namespace["loss"])
    pytest.importorskip("pytorch_metric_learning")
    namespace = {}
    torch.manual_seed(0)
    exec(compile(reproduction, "docs/losses.md", "exec"), namespace)
    emb, labels = namespace["emb"].tolist(), namespace["labels"].tolist()
    losses = {}
    for name, groups in (("wrong groups", [0, 0, 1, 1, 2, 2, 3, 3]), ("labels", labels)):
        aps = in_batch_smooth_ap(emb, groups, 0.01, include_query=True)
        losses[name] = 1 - sum(aps) / len(aps)
    assert abs(namespace["theirs"].item() - losses["wrong groups"]) < 1e-6  # computed in float32
    assert abs(namespace["ours"].item() - losses["labels"]) < 1e-12
    assert abs(losses["wrong groups"] - losses["labels"]) > 1e-3  # the two statements differ


def test_the_your_data_pages_own_loss_example_runs_and_its_ap_is_the_rankings(capsys):
    example, watched = _page_blocks("your-data.md", "## Your own score matrix and loss")
    namespace: dict = {}
    exec(compile(example, "docs/your-data.md", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) >= 4 and printed[0].startswith("[")
    scores = namespace["scores"].detach().double().tolist()
    # one positive per row (its own column), no ties: AP is 1 / the positive's rank
    expected = [1.0 / (1 + sum(s > row[i] for s in row)) for i, row in enumerate(scores)]
    got = namespace["F"].tie_aware_ap(namespace["scores"].detach(), namespace["positives"])
    assert got.tolist() == pytest.approx(expected, abs=1e-12)
    assert namespace["anatomy"].active_negatives.tolist() == json.loads(printed[0])
    # the page wrote watch(loss, ...) with loss the loss's value: watched as it now shows, the
    # Monitor logs the mean of the counts the functional anatomy printed
    exec(compile(watched, "docs/your-data.md", "exec"), namespace)
    logged = capsys.readouterr().out.splitlines()[-1]
    counts = json.loads(printed[0])
    assert float(logged) == pytest.approx(sum(counts) / len(counts), abs=1e-12)


def test_the_audit_pages_own_derivation_examples_run_and_decide(capsys):
    """The "Audit a derivation of your own" blocks run in order, as a reader pastes them: the
    InfoNCE gradient holds and every mutant is killed, the sign slip fails with the relative
    error a negation gives (|-g - g| / |g| = 2), and autograd agrees with the printed form."""
    page = (ROOT / "docs" / "audit.md").read_text()
    section = page[page.index("### Audit a derivation of your own"):]
    namespace: dict = {}
    for code in re.findall(r"```python\n(.*?)```", section, re.DOTALL):
        exec(compile(code, "docs/audit.md", "exec"), namespace)
    record = namespace["record"]
    assert record["verdict"] == "holds" and record["mutants_killed"] == record["mutants"] > 2
    slip = capsys.readouterr().out.splitlines()[1]
    assert slip.startswith("printed minus true is ") and slip.endswith("relative error 2 (200 %).")
    assert namespace["verdict"].verdict == "holds"
    assert namespace["verdict"].detail.endswith("over 3 cases.")

def test_every_relative_link_of_the_docs_pages_reaches_a_file_where_github_shows_them():
    """Each page is also read on the repository's web view, where a relative link resolves
    from the page's own folder: an image under ``figures/`` must be written ``../figures/``
    (the site build maps it back, ``tools/docs_hooks.py``)."""
    broken = []
    pages = sorted((ROOT / "docs").rglob("*.md"))
    assert len(pages) >= 10
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            path = link.partition("#")[0]
            if not path or re.match(r"[a-z]+:", path):  # an anchor here, or another site
                continue
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)}: {link}")
    assert broken == []


@pytest.mark.slow
def test_the_monitor_pages_loop_and_log_reading_run_as_pasted(tmp_path, monkeypatch):
    """The first page's loop, given a model, optimizer, loss and loader, logs the default
    schedule's steps (0-9, 10, 20, and the last one, which close() adds), and its read_jsonl
    block reads them back; step 0's loss is SmoothAP's of the first batch, as a float64 loop."""
    import copy

    from tests.reference.smooth_ap_loops import in_batch_smooth_ap

    (loop,) = _page_blocks("monitor.md", "## Attach it in two lines")
    (reading,) = _page_blocks("monitor.md", "## Reading the log")
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 4)
    loader = [(torch.randn(8, 6), torch.arange(8) % 4) for _ in range(25)]
    first = copy.deepcopy(model)(loader[0][0]).tolist()
    namespace = {"model": model, "loader": loader, "loss_fn": gradlab.SmoothAPLoss(0.01),
                 "optimizer": torch.optim.SGD(model.parameters(), lr=0.1)}  # fmt: skip
    exec(compile(loop, "docs/monitor.md", "exec"), namespace)
    exec(compile(reading, "docs/monitor.md", "exec"), namespace)
    steps = [step for step, _ in namespace["losses"]]
    assert steps == [*range(10), 10, 20, 24]
    aps = in_batch_smooth_ap(first, loader[0][1].tolist(), 0.01, include_query=False)
    assert namespace["losses"][0][1] == pytest.approx(1 - sum(aps) / len(aps), abs=1e-5)


def test_the_monitor_pages_quantity_of_ones_own_logs_its_row_median(tmp_path, monkeypatch):
    """The in-depth page's RowMedian, watched on one batch: the mean over the rows of the
    row's middle score (the 5th largest of 8, the row's own cosine of 1 included)."""
    (code,) = _page_blocks("monitor_in_depth.md", "## A quantity of your own")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "docs/monitor_in_depth.md", "exec"), namespace)
    monitor = namespace["monitor"]
    torch.manual_seed(0)
    embeddings = torch.randn(8, 5, dtype=torch.float64, requires_grad=True)
    monitor.watch(gradlab.SmoothAPLoss(0.01))(embeddings, torch.arange(8) % 2).backward()
    record = monitor.step()
    monitor.close()
    rows = embeddings.detach().tolist()
    norms = [math.sqrt(sum(v * v for v in row)) for row in rows]
    medians = []
    for a, norm_a in zip(rows, norms, strict=True):
        cosines = [sum(x * y for x, y in zip(a, b, strict=True)) / (norm_a * norm_b)
                   for b, norm_b in zip(rows, norms, strict=True)]  # fmt: skip
        medians.append(sorted(cosines, reverse=True)[4])
    assert record["row_median_mean"] == pytest.approx(sum(medians) / 8, abs=1e-9)


def test_the_monitor_pages_default_and_full_recipe_logs_fulls_extras_every_20th(
    tmp_path, monkeypatch
):
    """The presets section's recipe: the default preset's keys every step, the keys only full
    logs (its relaxation gap, anatomy, decomposition) at steps 0 and 20 alone."""
    from gradlab.monitor import PRESETS, read_jsonl

    (code,) = _page_blocks("monitor.md", "## What gets logged")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "docs/monitor.md", "exec"), namespace)
    monitor = namespace["monitor"]
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    torch.manual_seed(0)
    for _ in range(22):
        loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
        monitor.step()
    monitor.close()
    _, records = read_jsonl(tmp_path / "runs" / "default_and_full")
    default_names = {q.name for q in PRESETS["default"]}
    only_full = [key for q in PRESETS["full"] if q.name not in default_names for key in q.keys
                 if key in ("relaxation_gap", "anatomy_active_negative_share",
                            "decomposition_cosine_mean")]  # fmt: skip
    assert len(only_full) == 3
    assert [r["step"] for r in records] == list(range(22))
    assert all("loss" in r and "p_seed" in r and "gradient_count_mean" in r for r in records)
    for key in only_full:
        assert [r["step"] for r in records if key in r] == [0, 20], key
