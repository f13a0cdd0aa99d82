"""A loss of one's own on a batch's score matrix against itself (``z @ z.T``), watched with
``inputs="in_batch_scores"``: each query's own column is no candidate, whatever it holds."""

import json
import math
import warnings

import pytest
import torch

import gradlab
from gradlab.errors import GradlabError
from gradlab.functional import in_batch_layout, smooth_ap
from gradlab.monitor import read_jsonl

TAU = 0.05
LABELS = torch.arange(6).repeat_interleave(4)


def _batch(seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(len(LABELS), 8, generator=generator)


def own_smooth_ap(scores, labels):
    """SmoothAPLoss written on the score matrix: the query is no candidate of its own (its
    column, perhaps -inf, is not read)."""
    own = torch.eye(len(labels), dtype=torch.bool)
    positives = (labels.unsqueeze(0) == labels.unsqueeze(1)) & ~own
    scores = scores.masked_fill(own, 0.0)
    return (1 - smooth_ap(scores, positives, TAU, candidate_mask=~own)).mean()


def _logged(folder, watch, call) -> dict:
    with gradlab.Monitor(folder, tau=TAU, preset="full", every=1) as monitor:
        call(watch(monitor)).backward()
        monitor.step()
    return read_jsonl(folder)[1][-1]


def _score_call(embeddings, diagonal=None):
    scores = in_batch_layout(embeddings, LABELS).scores.clone().requires_grad_()
    given = scores if diagonal is None else scores.masked_fill(
        torch.eye(len(LABELS), dtype=torch.bool), diagonal)
    return lambda watched: watched(given, LABELS)


def test_the_score_matrix_of_a_batch_logs_what_its_embeddings_log(tmp_path):
    # the same SmoothAP, once on the embeddings, once on their cosine matrix written by hand
    embeddings = _batch()
    on_embeddings = _logged(tmp_path / "embeddings",
                            lambda m: m.watch(gradlab.SmoothAPLoss(TAU)),
                            lambda watched: watched(embeddings.clone().requires_grad_(), LABELS))
    on_scores = _logged(tmp_path / "scores",
                        lambda m: m.watch(own_smooth_ap, inputs="in_batch_scores"),
                        _score_call(embeddings))
    # every key the score matrix serves is the embeddings' (the rest need the embeddings)
    assert {"p_without_query", "gradient_count_mean", "margin_mean",
            "anatomy_active_positives"} <= set(on_scores) <= set(on_embeddings)
    for key in on_scores:
        assert on_scores[key] == pytest.approx(on_embeddings[key], rel=1e-6, abs=1e-12), key
    # the query's own score is not a score of this matrix: no P that counts it
    assert not {"p_seed", "p_off_diagonal", "p_cross_modal"} & set(on_scores)


@pytest.mark.parametrize("diagonal", [-math.inf, 0.0, 1e3])
def test_the_diagonal_is_not_read(tmp_path, diagonal):
    embeddings = _batch(1)
    watch = lambda m: m.watch(own_smooth_ap, inputs="in_batch_scores")  # noqa: E731
    as_computed = _logged(tmp_path / "computed", watch, _score_call(embeddings))
    masked = _logged(tmp_path / "masked", watch, _score_call(embeddings, diagonal))
    assert masked == as_computed


def test_a_score_matrix_that_is_not_square_is_refused_at_the_call(tmp_path):
    with gradlab.Monitor(tmp_path, strict=True) as monitor:
        watched = monitor.watch(lambda scores, positives: scores.sum(), inputs="in_batch_scores")
        with pytest.raises(GradlabError) as raised:
            watched(torch.zeros(3, 4), torch.zeros(3, 4, dtype=torch.bool))
        monitor.step()
    assert str(raised.value) == (
        "Monitor cannot read this loss call: expected loss(scores [B, B] of a batch against "
        "itself, positives [B, B] bool or labels [B]); got scores of shape (3, 4): a batch "
        "compared with itself gives a square matrix (a [Q, C] matrix of queries against "
        "other candidates is inputs='scores'); the call's arguments: "
        "args[0]=Tensor[3, 4], args[1]=Tensor[3, 4]"
    )


def _simclr_loss(scores, positives):  # a user's InfoNCE on the masked matrix
    masked = scores.masked_fill(torch.eye(len(scores), dtype=torch.bool), -math.inf) / 0.1
    return (masked.logsumexp(1) - masked.masked_fill(~positives, -math.inf).logsumexp(1)).mean()


def _pairs(size: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.arange(size) ^ 1, size).bool()  # 2k with 2k + 1


def _anatomy(folder, extra: float) -> dict:
    embeddings = torch.nn.functional.normalize(_batch(2), dim=1)
    with gradlab.Monitor(folder, preset="full", every=1) as monitor:
        watched = monitor.watch(_simclr_loss, inputs="in_batch_scores")
        scores = embeddings.clone().requires_grad_() @ embeddings.T
        (watched(scores, _pairs(len(scores))) + extra * (scores - 0.5).pow(2).mean()).backward()
        return {k: v for k, v in monitor.step().items() if k.startswith("anatomy_")}


def test_the_anatomy_reads_the_watched_losss_own_gradient_beside_other_terms(tmp_path):
    # a regulariser on the same score tensor adds its gradient to the tensor's, not the loss's
    alone, beside = _anatomy(tmp_path / "alone", 0.0), _anatomy(tmp_path / "beside", 100.0)
    assert alone and beside == alone


def test_a_permutation_of_the_rows_is_read_as_cross_entropy_targets(tmp_path):
    # read as labels, distinct values leave no row a positive; SimCLR's targets name the pair
    embeddings = torch.nn.functional.normalize(_batch(3), dim=1)
    scores = embeddings @ embeddings.T
    targets = torch.arange(len(scores)) ^ 1

    def logged(second, folder):
        with gradlab.Monitor(tmp_path / folder, every=1) as monitor:
            watched = monitor.watch(lambda s, y: s.sum() * 0, inputs="in_batch_scores")
            watched(scores.clone().requires_grad_(), second).backward()
            return monitor.step()

    as_targets, as_mask = logged(targets, "targets"), logged(_pairs(len(scores)), "mask")
    assert as_targets == as_mask and as_mask["degenerate_batch"] == 0.0


DEGENERATE = ("gradlab.Monitor: step {step}: the logged batch has no query with both a "
              "positive and a negative (a batch of one item, of one class, or of singletons: a "
              "ragged last batch?), so the quantities that rank its pairs are NaN for it; "
              "degenerate_batch marks such steps (later ones are not warned about)")


def test_positives_on_the_diagonal_are_left_out_and_said_once(tmp_path):
    embeddings = torch.nn.functional.normalize(_batch(4), dim=1)
    scores = embeddings @ embeddings.T
    positives = torch.eye(len(scores), dtype=torch.bool)  # paired rows' mask, misread
    with pytest.warns(RuntimeWarning) as caught, gradlab.Monitor(tmp_path, every=1) as monitor:
        watched = monitor.watch(lambda s, p: s.sum() * 0, inputs="in_batch_scores")
        for _ in range(2):
            watched(scores.clone().requires_grad_(), positives).backward()
            record = monitor.step()
    assert [str(w.message) for w in caught] == [
        f"gradlab.Monitor: the watched loss <lambda> was given positives with {len(scores)} of "
        f"{len(scores)} diagonal entries True, but with inputs='in_batch_scores' the diagonal is "
        "each query's own column, no candidate and no positive: they are left out (a mask "
        "that pairs view 2k with view 2k + 1 marks the entries off the diagonal; later calls "
        "are not checked)",
        DEGENERATE.format(step=0),  # no positive left: a batch without ranking signal
    ]
    assert record["degenerate_batch"] == 1.0


def test_the_diagonal_positives_warning_points_at_the_call(tmp_path):
    with pytest.warns(RuntimeWarning) as caught, gradlab.Monitor(tmp_path, every=1) as monitor:
        watched = monitor.watch(lambda s, p: s.sum() * 0, inputs="in_batch_scores")
        watched(torch.zeros(3, 3, requires_grad=True), torch.eye(3, dtype=torch.bool)).backward()
        monitor.step()
    assert [w.filename for w in caught if "diagonal" in str(w.message)] == [__file__]


@pytest.mark.parametrize("rows", [1, 2])
def test_a_batch_too_small_for_pairs_logs_p_as_nan(tmp_path, rows):
    with gradlab.Monitor(tmp_path, every=1) as monitor:
        watched = monitor.watch(lambda s, p: s.sum() * 0, inputs="in_batch_scores")
        watched(torch.zeros(rows, rows, requires_grad=True), _pairs(2)[:rows, :rows]).backward()
        record = monitor.step()
    assert math.isnan(record["p_without_query"])


def test_gradlabs_ntxent_is_no_loss_of_a_batchs_own_matrix(tmp_path):
    with gradlab.Monitor(tmp_path) as monitor, pytest.raises(GradlabError) as raised:
        monitor.watch(gradlab.NTXentLoss(0.1), inputs="in_batch_scores")
    assert str(raised.value) == (
        "inputs must match what NTXentLoss takes (its input_form: 'scores'), or be left out; "
        "got 'in_batch_scores' (a subclass called on other arguments declares its own "
        "input_form); NTXentLoss counts every column of its matrix as a candidate, a query's "
        "own included, so a batch's own matrix is no input of it (a loss of your own that "
        "masks the diagonal is watched with inputs='in_batch_scores')"
    )


def test_a_run_resumed_with_another_reading_of_its_loss_is_said_not_comparable(tmp_path):
    # the same loss on the same matrix: as [Q, C] scores recall@1 is 0 (the query itself ranks
    # first), as a batch against itself it is not; the header keeps which
    embeddings = torch.nn.functional.normalize(_batch(5), dim=1)
    scores = embeddings @ embeddings.T

    def run(inputs, **options):
        with gradlab.Monitor(tmp_path, every=1, **options) as monitor:
            watched = monitor.watch(_simclr_loss, inputs=inputs)
            watched(scores.clone().requires_grad_(), _pairs(len(scores))).backward()
            monitor.step()

    run("scores")
    with pytest.warns(UserWarning) as caught:
        run("in_batch_scores", resume=True)
    headers, records = read_jsonl(tmp_path)
    assert [header["inputs"] for header in headers] == [["scores"], ["in_batch_scores"]]
    assert [str(w.message) for w in caught] == [
        f"gradlab.Monitor: resume=True continues the run in {str(tmp_path)!r} with other "
        "settings (inputs ['scores'] -> ['in_batch_scores']): its records from step 1 on are "
        "not comparable with those before; use a new log_dir (or overwrite=True) for a new run"
    ]
    assert records[0]["margin_recall_at_1"] == 0.0 < records[1]["margin_recall_at_1"]


def test_a_meta_matrix_is_named_scores_whatever_the_form(tmp_path):
    with gradlab.Monitor(tmp_path, every=1, strict=True) as monitor:
        watched = monitor.watch(lambda scores, positives: scores.sum(), inputs="in_batch_scores")
        with pytest.raises(GradlabError) as raised:
            watched(torch.zeros(3, 3, device="meta"), torch.eye(3, dtype=torch.bool, device="meta"))
        monitor.step()
    assert str(raised.value).startswith("Monitor cannot read this loss call: scores is a meta "
                                        "tensor (a shape without values)")  # fmt: skip


def test_a_score_loss_called_by_keywords_or_on_a_list_is_read_or_said_as_before(tmp_path):
    # the score matrix's own view is taken from a positional tensor only
    def loss_fn(scores, positives):
        return scores.sum() * 0 if isinstance(scores, torch.Tensor) else torch.zeros(())

    with gradlab.Monitor(tmp_path, preset="full", every=1) as monitor:
        watched = monitor.watch(loss_fn, inputs="scores")
        with pytest.warns(RuntimeWarning, match="a loss call it cannot read was not logged"):
            assert watched([[1.0]], torch.eye(1, dtype=torch.bool)).item() == 0.0
        scores = torch.randn(4, 4, requires_grad=True)
        watched(scores=scores, positives=torch.eye(4, dtype=torch.bool)).backward()
        record = monitor.step()
    assert "anatomy_i2t_active_negatives_mean" in record


def test_a_run_whose_header_predates_inputs_resumes_without_a_word_about_them(tmp_path):
    # headers written before "inputs" was recorded (gradlab 0.2.0's first releases) say nothing
    # of how the loss was read: nothing to compare, nothing to warn about
    embeddings = torch.nn.functional.normalize(_batch(6), dim=1)
    scores = embeddings @ embeddings.T

    def run(**options):
        with gradlab.Monitor(tmp_path, every=1, **options) as monitor:
            watched = monitor.watch(_simclr_loss, inputs="in_batch_scores")
            watched(scores.clone().requires_grad_(), _pairs(len(scores))).backward()
            monitor.step()

    run()
    log = tmp_path / "metrics.jsonl"
    first, *rest = log.read_text().splitlines()
    header = json.loads(first)
    assert header["header"].pop("inputs") == ["in_batch_scores"]
    assert "plots" not in header["header"]  # gradlab's own quantities: drawn from its code
    log.write_text("\n".join([json.dumps(header), *rest]) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(resume=True)
    assert [h.get("inputs") for h in read_jsonl(tmp_path)[0]] == [None, ["in_batch_scores"]]
