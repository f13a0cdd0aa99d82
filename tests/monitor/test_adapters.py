"""Loss adapters: how the Monitor reads a watched loss, from one registry.

The README's NT-Xent and VSE++ Monitor examples are read out of README.md and run as written
(no ``inputs=``): they must log their anatomy keys.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch

import gradlab
from gradlab import GradlabError
from gradlab.monitor import Monitor, adapters, every, read_jsonl
from gradlab.monitor.anatomy import Anatomy

README = Path(__file__).resolve().parents[2] / "docs" / "monitor_quantities.md"


def _readme_score_example() -> tuple[str, str]:
    """The README's two lines that watch NT-Xent and call it on a score matrix, and the loss
    its comment names as the alternative (VSE++'s)."""
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^(monitor = gradlab\.Monitor\(.*?\))\s*#.*\n"
                      r"(loss_fn = monitor\.watch\(gradlab\.NTXentLoss\(.*?\)\))\s*#.*?"
                      r"(gradlab\.MaxViolationTripletLoss\([^)]*\))\n(loss = loss_fn\(.*?\))"
                      r"\s*#", text, re.MULTILINE)  # fmt: skip
    assert match, "README.md lost its NT-Xent Monitor example"
    make_monitor, watch, alternative, call = match.groups()
    return f"{make_monitor}\n{watch}\n{call}\n", alternative


@pytest.mark.parametrize("loss", ["NT-Xent", "VSE++"])
def test_the_readmes_score_loss_examples_log_their_anatomy_as_written(tmp_path, loss):
    code, alternative = _readme_score_example()
    if loss == "VSE++":
        code = re.sub(r"gradlab\.NTXentLoss\([^)]*\)", alternative, code)
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(6, 8, generator=generator, requires_grad=True)
    captions = torch.randn(6, 8, generator=generator, requires_grad=True)
    code = re.sub(r'Monitor\("[^"]*"', f"Monitor({str(tmp_path)!r}", code)  # the log folder
    namespace = {"gradlab": gradlab, "images": images, "captions": captions,
                 "positives": torch.eye(6, dtype=torch.bool)}
    exec(compile(code, str(README), "exec"), namespace)
    with namespace["monitor"] as monitor:
        namespace["loss"].backward()
        record = monitor.step()
    for direction in ("i2t", "t2i"):
        assert f"anatomy_{direction}_active_negatives_mean" in record
    assert "anatomy" not in monitor.not_logged
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert len(records) == 1 and "p_cross_modal" in records[0]


@pytest.mark.parametrize(
    ("make", "form"),
    [
        (lambda: gradlab.NTXentLoss(0.1), "scores"),
        (lambda: gradlab.MaxViolationTripletLoss(0.2), "scores"),
        (lambda: gradlab.SmoothAPLoss(0.05), "embeddings"),
        (lambda: gradlab.FastAPLoss(), "embeddings"),
        (lambda: (lambda embeddings, labels: embeddings.sum()), "embeddings"),
    ],
)
def test_a_loss_is_watched_in_the_form_it_declares(make, form):
    assert adapters.adapt(make()).inputs == form


def test_a_loss_declaring_scores_is_watched_on_scores(tmp_path):
    class MyScoreLoss(torch.nn.Module):
        input_form = "scores"

        def forward(self, scores, positives):
            return -(scores * positives).sum() + scores.logsumexp(dim=1).sum()

    scores = torch.randn(5, 5, requires_grad=True)
    with Monitor(tmp_path, quantities=[Anatomy(every(1))]) as monitor:
        monitor.watch(MyScoreLoss())(scores, torch.eye(5, dtype=torch.bool)).backward()
        record = monitor.step()
    # No score_recorder: the hook on the scores argument reads the whole dL/dS.
    assert "anatomy_i2t_active_positives" in record and "anatomy_t2i_active_positives" in record


@pytest.mark.parametrize(("loss_fn", "inputs", "declared"), [
    (gradlab.NTXentLoss(0.1), "embeddings", "scores"),
    (gradlab.SmoothAPLoss(0.05), "scores", "embeddings")])  # fmt: skip
def test_inputs_that_contradict_the_declared_form_are_refused(loss_fn, inputs, declared):
    # NT-Xent watched with inputs="embeddings" logged its score rows as embeddings, silently
    with pytest.raises(GradlabError) as raised:
        adapters.adapt(loss_fn, inputs=inputs)
    assert str(raised.value) == (
        f"inputs must match what {type(loss_fn).__name__} takes (its input_form: "
        f"{declared!r}), or be left out; got {inputs!r} (a subclass called on other arguments "
        "declares its own input_form)")
    assert adapters.adapt(loss_fn, inputs=declared).inputs == declared  # the same form: taken

    class OnEmbeddings(type(loss_fn)):  # a subclass called otherwise says so itself
        input_form = inputs

    assert adapters.adapt(OnEmbeddings(0.1), inputs=inputs).inputs == inputs


def test_a_registered_maker_is_asked_first_and_recognises_its_loss(monkeypatch):
    def smooth_ap_by_attribute(loss_fn, inputs):
        tau = getattr(loss_fn, "my_smooth_ap_tau", None)
        if tau is None:
            return None
        return adapters.embedding_adapter(loss_fn, loss_kind="exclude_query", loss_tau=tau)

    monkeypatch.setattr(adapters, "ADAPTERS", list(adapters.ADAPTERS))
    assert adapters.register(smooth_ap_by_attribute) is smooth_ap_by_attribute

    def mine(embeddings, labels):
        return embeddings.sum()

    mine.my_smooth_ap_tau = 0.2
    adapter = adapters.adapt(mine)
    assert (adapter.loss_kind, adapter.loss_tau) == ("exclude_query", 0.2)
    assert adapter.why_not(frozenset({"loss_kind"})) is None
    assert adapters.adapt(lambda e, y: e.sum()).loss_kind is None  # not recognised: the rest


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: adapters.adapt(42), "loss_fn must be callable"),
        (lambda: adapters.adapt(len, inputs="logits"),
         r"inputs must be one of \('embeddings', 'scores', 'in_batch_scores'\) or None; "
         r"got 'logits'"),
        (lambda: adapters.register("not a maker"), "maker must be a callable"),
    ],
)
def test_bad_adapter_calls_name_the_argument(call, message):
    with pytest.raises(GradlabError, match=message):
        call()


def test_an_unknown_need_is_named_as_such():
    adapter = adapters.adapt(gradlab.NTXentLoss(0.1))
    assert adapter.why_not(frozenset({"hessian"})) == (
        "needs hessian, which the Monitor does not know"
    )


@pytest.mark.parametrize("reverse", [False, True])
def test_cross_modal_keywords_are_read_by_name_in_any_order(tmp_path, reverse):
    generator = torch.Generator().manual_seed(4)
    queries = torch.randn(5, 6, generator=generator, requires_grad=True)
    candidates = torch.randn(7, 6, generator=generator, requires_grad=True)
    positives = torch.zeros(5, 7, dtype=torch.bool)
    positives[torch.arange(5), torch.arange(5)] = True
    keywords = {"candidates": candidates, "positives": positives}
    if reverse:
        keywords = dict(reversed(keywords.items()))
    with Monitor(tmp_path, preset="full", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
        loss_fn(queries, **keywords).backward()
        record = monitor.step()
    assert monitor.skipped_calls == 0
    assert "p_cross_modal" in record and "anatomy_i2t_active_negatives_mean" in record
    assert record["smooth_ap"] == pytest.approx(1 - loss_fn(queries, **keywords).item(), abs=1e-6)


def test_an_input_form_that_is_neither_is_refused_by_name():
    class Odd(torch.nn.Module):
        input_form = "logits"

    with pytest.raises(GradlabError, match=r"^Odd.input_form must be one of \('embeddings', "
                                           r"'scores', 'in_batch_scores'\); "
                                           r"got 'logits'$"):  # fmt: skip
        adapters.adapt(Odd())


def test_a_loss_with_its_own_score_recorder_but_no_form_is_read_on_embeddings(tmp_path):
    class Recording(torch.nn.Module):
        """An embedding loss that hands its cosine matrix to a score_recorder."""

        score_recorder = None

        def forward(self, embeddings, labels):
            normalized = torch.nn.functional.normalize(embeddings, dim=1)
            scores = normalized @ normalized.T
            if self.score_recorder is not None:
                self.score_recorder("in_batch", scores, None)
            same = labels.unsqueeze(0) == labels.unsqueeze(1)
            return -(scores * same).sum() + scores.exp().sum()

    embeddings = torch.randn(8, 4, requires_grad=True)
    with Monitor(tmp_path, quantities=[Anatomy(every(1))]) as monitor:
        monitor.watch(Recording())(embeddings, torch.arange(8) % 2).backward()
        record = monitor.step()
    assert "anatomy_active_negatives_mean" in record  # in-batch: no direction prefix


def _blocks(heading: str) -> list[str]:
    """The python blocks of docs/monitor_quantities.md from ``heading`` to the next ``## ``
    heading."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index(heading):]
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def test_the_anatomy_sections_own_loss_examples_run_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # they write under runs/
    namespace: dict = {}
    with warnings.catch_warnings():  # the page's examples say nothing the page does not
        warnings.simplefilter("error")  # (raw dot products warned of scores beyond cosines)
        for code in _blocks("## Gradient anatomy"):
            exec(compile(code, str(README), "exec"), namespace)
    # The user's loss is InfoNCE: dL/dS = (softmax(S / t) - [positive]) / (8 t) (float64), and
    # the active negatives are those of at least 1 % of the row's largest |dL/dS|.
    score_grad = namespace["score_grad"]
    weights = torch.softmax(namespace["scores"].detach().double() / 0.1, dim=1)
    expected = (weights - torch.eye(8, dtype=torch.float64)) / (8 * 0.1)
    assert torch.allclose(score_grad.double(), expected, rtol=1e-4, atol=1e-7)
    active = [sum(1 for j in range(8) if j != i and abs(score_grad[i, j]) > 1e-10
                  and abs(score_grad[i, j]) >= 0.01 * score_grad[i].abs().max())
              for i in range(8)]  # fmt: skip
    assert namespace["anatomy"].active_negatives.tolist() == active
    _, records = read_jsonl(tmp_path / "runs" / "my_loss" / "metrics.jsonl")
    assert [record["step"] for record in records] == [0, 1, 2, 3, 4]
    assert all(f"anatomy_{d}_active_negatives_mean" in r for r in records for d in ("i2t", "t2i"))
    # step 0 scores the same matrix with the same weights: its rows are the functional call's
    assert records[0]["anatomy_i2t_active_negatives_mean"] == pytest.approx(sum(active) / 8)
    _, records = read_jsonl(tmp_path / "runs" / "ntxent" / "metrics.jsonl")
    assert "anatomy_i2t_active_negatives_mean" in records[0]
    assert "anatomy" not in namespace["monitor"].not_logged  # the PML loss exposes its matrix
    # the SimCLR block: P without the query, and each view's best candidate is its pair
    views, positives = namespace["views"].detach(), namespace["same_image"]
    scores = (views @ views.T).fill_diagonal_(-2.0)  # below every cosine: never the best
    pair_first = (scores.argmax(dim=1) == positives.int().argmax(dim=1)).double().mean()
    _, records = read_jsonl(tmp_path / "runs" / "simclr" / "metrics.jsonl")
    assert [key for key in records[0] if key.startswith("p_")] == ["p_without_query"]
    assert records[0]["margin_recall_at_1"] == pytest.approx(float(pair_first))
    assert float(pair_first) == 1.0  # what the page's comment says of these close views


def test_the_preset_plus_quantities_example_logs_both(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for code in _blocks("## Geometry, margins, temperature and false negatives"):
        exec(compile(code, str(README), "exec"), namespace)
    names = [quantity.name for quantity in namespace["monitor"].quantities]
    preset = [quantity.name for quantity in namespace["PRESETS"]["default"]]
    assert names[:len(preset)] == preset
    assert names[len(preset):] == ["temperature", "chance_level", "suspects"]
    # the closed form dL/d log s on the loss's logits is what autograd sent the parameter
    record = namespace["record"]
    assert record["temperature_log_scale_grad"] == pytest.approx(
        record["temperature_log_scale_grad_observed"], rel=1e-5)
    # the loss declares logits: the quantities of SmoothAP's sigmoid at tau are left out (the
    # page's first recipe, NTXentLoss(1.0) on logits, logged them on logits of about +-14)
    left_out = namespace["monitor"].not_logged
    for name in ("operating_region", "gradient_counts"):
        assert left_out[name] == (
            "reads SmoothAP's sigmoid at the Monitor's tau on cosine scores; the watched loss "
            "clip_loss declares that its matrix holds logits (SoftmaxLogits(logits=True))")
