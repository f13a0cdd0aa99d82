"""The suspects quantity in a Monitor run, against a float64 loop of InfoNCE's dL/dS."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import gradlab
from gradlab.errors import GradlabError
from gradlab.functional import content_hashes
from gradlab.monitor import Monitor, Suspects, every
from gradlab.monitor.batch import BatchView
from gradlab.validation import skip_value_checks
from tests.helpers.refusals import refusal_of


def _infonce_row_grad(scores, temperature):
    """dL/dS of mean-over-rows InfoNCE with the diagonal positive: (softmax - onehot) / (T Q)."""
    size = len(scores)
    grad = []
    for i, row in enumerate(scores):
        top = max(row)
        weights = [math.exp((s - top) / temperature) for s in row]
        total = sum(weights)
        grad.append([(w / total - (i == j)) / (temperature * size) for j, w in enumerate(weights)])
    return grad


def test_counts_and_shares_match_a_loop(tmp_path):
    generator = torch.Generator().manual_seed(0)
    texts = ["a red circle", "two squares", "a red circle", "a blue line", "two squares", "x"]
    scores = torch.rand(6, 6, generator=generator, dtype=torch.float64) * 2 - 1
    scores.fill_diagonal_(0.9)
    scores[1, 5] = 0.95  # a score-rule suspect (margin 0: at least the positive)
    hashes = content_hashes(texts)
    quantity = Suspects(every(1), hashes=lambda: hashes, margin=0.0, k=2)
    temperature = 0.1
    with Monitor(tmp_path, quantities=[quantity]) as monitor:
        loss_fn = monitor.watch(gradlab.NTXentLoss(temperature=temperature, direction="i2t"))
        leaf = scores.clone().requires_grad_(True)
        loss_fn(leaf, torch.eye(6, dtype=torch.bool)).backward()
        record = monitor.step()
    flagged = {(0, 2), (2, 0), (1, 4), (4, 1), (1, 5)}  # duplicates both ways, and the rule
    values = scores.tolist()
    flagged |= {(i, j) for i in range(6) for j in range(6) if i != j and values[i][j] >= 0.9}
    grad = _infonce_row_grad(values, temperature)
    negatives = [(i, j) for i in range(6) for j in range(6) if i != j]
    mass = sum(abs(grad[i][j]) for i, j in negatives)
    shares = []
    for i in range(6):
        hardest = sorted((j for j in range(6) if j != i), key=lambda j: -values[i][j])[:2]
        shares.append(sum((i, j) in flagged for j in hardest) / 2)
    assert record["suspects_count"] == len(flagged)
    assert record["suspects_per_query"] == pytest.approx(len(flagged) / 6)
    share = sum(abs(grad[i][j]) for i, j in flagged) / mass
    assert record["suspects_gradient_share"] == pytest.approx(share, rel=1e-9)
    assert record["suspects_top_k_share"] == pytest.approx(sum(shares) / 6, rel=1e-12)


def test_in_batch_labels_and_no_gradient(tmp_path):
    embeddings = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    labels = torch.arange(8) % 4
    sources = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])  # items 0 and 4 share a source, and so on
    quantity = Suspects(every(1), labels=lambda: sources, margin=None, gradient=False)
    with Monitor(tmp_path, quantities=[quantity]) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        loss_fn(embeddings.requires_grad_(True), labels).backward()
        record = monitor.step()
    pairs = [(i, j) for i in range(8) for j in range(8)
             if i != j and labels[i] != labels[j] and sources[i] == sources[j]]  # fmt: skip
    assert record["suspects_count"] == len(pairs)
    assert "suspects_gradient_share" not in record


@pytest.mark.parametrize(("make", "match"), [
    (lambda: Suspects(labels=None, hashes=None, margin=None), "give at least one of labels"),
    (lambda: Suspects(labels=torch.zeros(3)), "labels must be a callable"),
    (lambda: Suspects(hashes=[1, 2]), "hashes must be a callable"),
    (lambda: Suspects(margin=-1.0), "margin must be a finite number"),
    (lambda: Suspects(k=0), "k must be a positive"),
    (lambda: Suspects(gradient=1), "gradient must be True or False"),
])  # fmt: skip
def test_bad_options_are_refused_when_made(make, match):
    with pytest.raises(GradlabError, match=match):
        make()


def _ap_grad_share(embeddings, labels, sources, tau, k, include_query=False):
    """SmoothAP in-batch (query excluded): the suspects' share of sum |dAP/dS| over the
    negatives (the loss's 1/(queries) factor cancels in a share), their share of each query's
    k hardest negatives, and their count, by loops."""
    from tests.reference.smooth_ap_loops import cosine, smooth_ap_one_query_gradient

    size = len(labels)
    mass = suspect_mass = 0.0
    shares, count = [], 0
    for q in range(size):
        others = [c for c in range(size) if include_query or c != q]
        scores = [cosine(embeddings[q], embeddings[c]) for c in others]
        positives = [labels[c] == labels[q] for c in others]
        grad = smooth_ap_one_query_gradient(scores, positives, tau)
        negatives = [i for i, c in enumerate(others) if not positives[i]]
        flagged = {i for i in negatives if sources[others[i]] == sources[q]}  # never q itself
        count += len(flagged)
        mass += sum(abs(grad[i]) for i in negatives)
        suspect_mass += sum(abs(grad[i]) for i in flagged)
        hardest = sorted(negatives, key=lambda i: -scores[i])[:k]
        shares.append(sum(i in flagged for i in hardest) / len(hardest))
    return suspect_mass / mass, sum(shares) / len(shares), count


def test_a_smooth_ap_loss_s_gradient_share_and_the_default_k(tmp_path):
    """SmoothAP watched on embeddings: dL/dS comes from the loss's own terms; 14 items of 7
    classes leave 12 negatives per query, more than the default k = 10."""
    generator = torch.Generator().manual_seed(4)
    embeddings = torch.randn(14, 5, generator=generator, dtype=torch.float64)
    labels = torch.arange(14) % 7
    sources = torch.arange(14) % 5  # items of one source collide across classes
    quantity = Suspects(every(1), labels=lambda: sources, margin=None)
    with Monitor(tmp_path, quantities=[quantity], tau=0.05) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        loss_fn(embeddings.clone().requires_grad_(True), labels).backward()
        record = monitor.step()
    share, top_k, count = _ap_grad_share(embeddings.tolist(), labels.tolist(), sources.tolist(),
                                         0.05, 10)  # fmt: skip
    assert record["suspects_count"] == count
    assert record["suspects_per_query"] == pytest.approx(count / 14)
    assert record["suspects_gradient_share"] == pytest.approx(share, rel=1e-9)
    assert record["suspects_top_k_share"] == pytest.approx(top_k, rel=1e-12)


def test_the_default_rule_flags_negatives_at_or_above_the_lowest_positive():
    """Suspects() alone: the score rule with margin 0, in the scores' own units."""
    from gradlab.monitor.batch import BatchView
    from tests.reference.geometry_loops import cosines

    generator = torch.Generator().manual_seed(9)
    queries, candidates = torch.randn(2, 5, 3, generator=generator, dtype=torch.float64)
    positives = torch.eye(5, dtype=torch.bool)
    view = BatchView(embeddings=queries, candidates=candidates, positives=positives)
    values = Suspects(gradient=False).compute(view)
    rows = cosines(queries.tolist(), candidates.tolist())
    flagged = [(i, j) for i in range(5) for j in range(5) if i != j and rows[i][j] >= rows[i][i]]
    assert 0 < len(flagged) < 20
    assert float(values["suspects_count"]) == len(flagged)


def test_the_schedule_is_kept():
    assert not Suspects(every(2), margin=0.0).should_compute(1)
    assert Suspects(every(2), margin=0.0).should_compute(2)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Suspects(labels=None, hashes=None, margin=None),
     "give at least one of labels, hashes or margin (the rules that flag a suspect); got none"),
    (lambda: Suspects(labels=torch.zeros(3)),
     "labels must be a callable returning the current batch's labels (a tensor); got Tensor"),
    (lambda: Suspects(margin=2e6), "margin must be a finite number in [0, 1e+06]; got 2000000.0"),
    (lambda: Suspects(margin=1e6 + 0.5),
     "margin must be a finite number in [0, 1e+06]; got 1000000.5"),
])  # fmt: skip
def test_bad_options_word_for_word(make, message):
    assert refusal_of(make) == message


def test_smooth_ap_s_exact_gradient_when_the_loss_recorded_no_matrix():
    """A SmoothAP capture without a hooked matrix (its ``smooth_ap_tau`` set, no ``grad``): the
    gradient share comes from SmoothAP's exact dL/dS at the step's scores, the query excluded
    in-batch; a ``"t2i"`` capture before it is skipped. Against the float64 loop."""
    from gradlab.monitor.batch import BatchView, ScoreCapture

    generator = torch.Generator().manual_seed(4)
    embeddings = torch.randn(14, 5, generator=generator, dtype=torch.float64)
    labels = torch.arange(14) % 7
    sources = torch.arange(14) % 5
    positives = (labels[:, None] == labels[None]) & ~torch.eye(14, dtype=torch.bool)
    candidates = ~torch.eye(14, dtype=torch.bool)
    view = BatchView(embeddings=embeddings, labels=labels, tau=0.05)
    view.score_captures = [ScoreCapture("t2i", None, positives.T, grad=torch.ones(14, 14)),
                           ScoreCapture("in_batch", None, positives, candidates,
                                        smooth_ap_tau=0.05)]  # fmt: skip
    values = Suspects(labels=lambda: sources, margin=None).compute(view)
    share, top_k, count = _ap_grad_share(embeddings.tolist(), labels.tolist(), sources.tolist(),
                                         0.05, 10)  # fmt: skip
    assert float(values["suspects_count"]) == count
    assert float(values["suspects_gradient_share"]) == pytest.approx(share, rel=1e-9)
    assert float(values["suspects_top_k_share"]) == pytest.approx(top_k, rel=1e-12)


def test_smooth_ap_s_exact_gradient_with_the_query_among_its_candidates():
    """In-batch SmoothAP whose candidates include the query (no candidate mask): the query is
    its own positive, and dL/dS is SmoothAP's with the query included."""
    from gradlab.monitor.batch import BatchView, ScoreCapture

    generator = torch.Generator().manual_seed(5)
    embeddings = torch.randn(12, 4, generator=generator, dtype=torch.float64)
    labels = torch.arange(12) % 4
    sources = torch.arange(12) % 5
    positives = labels[:, None] == labels[None]
    view = BatchView(embeddings=embeddings, labels=labels, tau=0.05, loss_kind="include_query")
    view.score_captures = [ScoreCapture("in_batch", None, positives, None, smooth_ap_tau=0.05)]
    values = Suspects(labels=lambda: sources, margin=None).compute(view)
    share, _, _ = _ap_grad_share(embeddings.tolist(), labels.tolist(), sources.tolist(), 0.05,
                                 10, include_query=True)  # fmt: skip
    assert float(values["suspects_gradient_share"]) == pytest.approx(share, rel=1e-9)


def test_a_cross_modal_capture_read_both_ways_gives_its_gradient():
    from gradlab.monitor.batch import BatchView, ScoreCapture

    generator = torch.Generator().manual_seed(6)
    queries, candidates = torch.randn(2, 4, 3, generator=generator, dtype=torch.float64)
    positives = torch.eye(4, dtype=torch.bool)
    grad = torch.randn(4, 4, generator=generator, dtype=torch.float64)
    view = BatchView(embeddings=queries, candidates=candidates, positives=positives)
    view.score_captures = [ScoreCapture("both", None, positives, grad=grad)]
    hashes = torch.tensor([1, 2, 1, 3])
    values = Suspects(hashes=lambda: hashes, margin=None).compute(view)
    flagged = [(0, 2), (2, 0)]
    negatives = [(i, j) for i in range(4) for j in range(4) if i != j]
    mass = sum(abs(float(grad[i, j])) for i, j in negatives)
    expected = sum(abs(float(grad[i, j])) for i, j in flagged) / mass
    assert float(values["suspects_gradient_share"]) == pytest.approx(expected, rel=1e-12)


def test_sources_that_return_none():
    """A labels source that returns None this step: the other rules still run; with no rule
    left the quantity logs nothing."""
    from gradlab.monitor.batch import BatchView

    view = BatchView(embeddings=torch.eye(3), labels=torch.tensor([0, 0, 1]))
    assert Suspects(labels=lambda: None, margin=None, gradient=False).compute(view) == {}
    values = Suspects(labels=lambda: None, margin=0.0, gradient=False).compute(view)
    # orthogonal points: queries 0 and 1 score their positive 0 and item 2 ties it (>=)
    assert float(values["suspects_count"]) == 2.0


def test_pairs_of_labels_and_an_unread_capture_first():
    """A cross-modal batch with (query labels, candidate labels) from its source; a capture
    without a gradient (not SmoothAP) before the one that has it is passed over."""
    from gradlab.monitor.batch import BatchView, ScoreCapture

    generator = torch.Generator().manual_seed(7)
    queries, candidates = torch.randn(2, 3, 4, generator=generator, dtype=torch.float64)
    positives = torch.eye(3, dtype=torch.bool)
    grad = torch.randn(3, 3, generator=generator, dtype=torch.float64)
    view = BatchView(embeddings=queries, candidates=candidates, positives=positives)
    view.score_captures = [ScoreCapture("i2t", None, positives),
                           ScoreCapture("i2t", None, positives, grad=grad)]  # fmt: skip
    pair = (torch.tensor([0, 1, 2]), torch.tensor([1, 1, 0]))  # query 0 ~ candidate 2, 1 ~ 0
    values = Suspects(labels=lambda: pair, margin=None).compute(view)
    flagged = [(0, 2), (1, 0)]
    negatives = [(i, j) for i in range(3) for j in range(3) if i != j]
    mass = sum(abs(float(grad[i, j])) for i, j in negatives)
    assert float(values["suspects_count"]) == 2.0
    expected = sum(abs(float(grad[i, j])) for i, j in flagged) / mass
    assert float(values["suspects_gradient_share"]) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("paired", [False, True], ids=["one", "pair"])
def test_suspect_labels_kept_on_the_cpu_are_moved_to_the_batchs_device(paired):
    labels = torch.arange(6) // 2  # the user's labels, on the CPU
    source = (lambda: (labels, labels)) if paired else (lambda: labels)
    with torch.no_grad(), skip_value_checks():
        values = Suspects(labels=source, gradient=False).compute(BatchView(
            embeddings=torch.empty(6, 4, device="meta"),
            labels=torch.empty(6, dtype=torch.long, device="meta")))
    assert values and {str(value.device) for value in values.values()} == {"meta"}


def test_a_global_batch_logs_its_suspects_and_no_gradient_share_of_another_matrix(
    tmp_path, one_rank_group, monkeypatch
):
    # Under torch.distributed a loss on embeddings is read on every rank's rows (here a second
    # rank holding the same values under another checksum), while dL/dS is this rank's own
    # 6 x 6 matrix: it is no gradient of the 12 x 12 one, so no share (not a NaN, which the
    # plot would draw as a diverged step).
    def all_gather(out, tensor, *args, **kwargs):
        out[0].copy_(tensor)
        out[1].copy_(tensor)
        if tensor.dtype == torch.int64 and tuple(tensor.shape) == (10,):  # the step's offer
            out[1][8] += 1  # another batch than this rank's (its checksum)

    monkeypatch.setattr(torch.distributed, "get_world_size", lambda *a, **k: 2)
    monkeypatch.setattr(torch.distributed, "all_gather", all_gather)
    monkeypatch.setattr(torch.distributed, "all_reduce", lambda tensor, *a, **k: tensor.mul_(2))
    embeddings = torch.randn(6, 4, generator=torch.Generator().manual_seed(7))
    labels = torch.arange(6) % 3
    sources = torch.tensor([0, 1, 1, 2, 0, 2])  # items 0 and 4 share a source, and so on
    every_source = torch.cat([sources, sources])  # every rank's, in rank order
    quantity = Suspects(every(1), labels=lambda: every_source, margin=None)
    with Monitor(tmp_path, quantities=[quantity]) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        loss_fn(embeddings.requires_grad_(True), labels).backward()
        record = monitor.step()
    assert "suspects" not in monitor.disabled
    global_labels = labels.tolist() * 2
    global_sources = every_source.tolist()
    pairs = [(i, j) for i in range(12) for j in range(12) if i != j
             and global_labels[i] != global_labels[j] and global_sources[i] == global_sources[j]]
    assert record["suspects_count"] == len(pairs) > 0
    assert "suspects_gradient_share" not in record


def test_in_batch_the_query_is_no_positive_of_its_own(tmp_path):
    # The score rule reads each query's lowest positive among the other items: a query alone
    # in its class (items 4 and 5) has none and flags nothing, though its score with itself
    # (1) is the largest of its row; margin 0.5 flags the rest widely.
    from tests.reference.geometry_loops import cosines

    embeddings = torch.randn(6, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 1, 2, 3])
    with Monitor(tmp_path, quantities=[Suspects(every(1), margin=0.5, gradient=False)]) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        loss_fn(embeddings.requires_grad_(True), labels).backward()
        record = monitor.step()
    rows = cosines(embeddings.tolist(), embeddings.tolist())
    flagged = 0
    for i in range(6):
        positives = [rows[i][j] for j in range(6) if j != i and labels[j] == labels[i]]
        if not positives:
            continue
        threshold = min(positives) - abs(min(positives)) * 0.5
        flagged += sum(1 for j in range(6) if labels[j] != labels[i] and rows[i][j] >= threshold)
    assert 0 < flagged < 16
    assert record["suspects_count"] == flagged


@pytest.mark.parametrize(("returned", "got"), [
    (["a red circle", "two squares", "a red circle"], "list"),
    ((torch.zeros(3), ["a", "b", "c"]), "tuple of (Tensor, list)"),
    ((torch.zeros(3),), "tuple of (Tensor)"),
])  # fmt: skip
def test_a_hashes_source_that_returns_no_tensor_is_said_in_one_sentence(tmp_path, returned, got):
    # hashes=lambda: texts (content_hashes forgotten) disabled the quantity with an
    # AttributeError ('list' object has no attribute 'to') and its traceback
    with pytest.warns(RuntimeWarning) as caught:
        with Monitor(tmp_path, quantities=[Suspects(every(1), hashes=lambda: returned)]) as run:
            loss_fn = run.watch(gradlab.NTXentLoss(0.1))
            scores = torch.randn(3, 3, requires_grad=True)
            loss_fn(scores, torch.eye(3, dtype=torch.bool)).backward()
            run.step()
    assert [str(w.message) for w in caught] == [
        "gradlab.Monitor: step 0: quantity 'suspects' is disabled, refused in compute(): "
        "hashes() must return the current batch's hashes as a tensor, a pair (query hashes, "
        "candidate hashes) of tensors or "
        f"None; got {got} (gradlab.functional.content_hashes(texts) makes them of the raw "
        "texts) (strict=True raises instead)"]
    with pytest.raises(GradlabError, match=r"^quantity 'suspects' raised in compute\(\) at step "
                       r"0: labels\(\) must return the current batch's "
                                           r"labels as a tensor, .* got list$"):
        with Monitor(tmp_path / "strict", strict=True,
                     quantities=[Suspects(every(1), labels=lambda: [0, 1, 0])]) as run:
            loss_fn = run.watch(gradlab.NTXentLoss(0.1))
            scores = torch.randn(3, 3, requires_grad=True)
            loss_fn(scores, torch.eye(3, dtype=torch.bool)).backward()
            run.step()


@pytest.mark.parametrize("direction", ["t2i", "i2t", "both"])
def test_a_loss_that_ranks_the_columns_alone_is_told_it_gets_no_gradient_share(
    tmp_path, direction
):
    # a t2i-only loss dropped suspects_gradient_share from the records without a word
    generator = torch.Generator().manual_seed(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=[Suspects(every(1), margin=0.0)]) as run:
            loss_fn = run.watch(gradlab.NTXentLoss(0.1, direction=direction))
            for _ in range(2):
                scores = torch.randn(4, 4, generator=generator, requires_grad=True)
                loss_fn(scores, torch.eye(4, dtype=torch.bool)).backward()
                record = run.step()
    said = [(str(w.message), w.filename) for w in caught if w.category is RuntimeWarning]
    assert ("suspects_gradient_share" in record) == (direction != "t2i")
    assert said == ([(
        "gradlab.Monitor: Suspects reads the rows of the score matrix as queries, but the "
        "watched loss ranks its columns alone (direction 't2i'): suspects_gradient_share, a "
        "share of the rows' dL/dS, is not logged, and the counts describe rows as queries, "
        "which this loss does not rank", __file__)] if direction == "t2i" else [])


def test_a_view_without_score_captures_is_not_taken_for_a_loss_of_the_columns():
    # no capture at all (a view built by hand): no gradient share, and no word of a t2i loss
    view = BatchView(embeddings=torch.eye(4), labels=torch.tensor([0, 0, 1, 1]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = Suspects(margin=0.0).compute(view)
    assert "suspects_gradient_share" not in values and "suspects_count" in values


def test_a_loss_without_a_score_matrix_is_told_the_gradient_free_suspects(tmp_path):
    # the reason named rewriting the loss; gradient=False logs the other keys as it is
    from gradlab.monitor import Quantity

    class NeedsTheGradientStill(Quantity):  # offers fewer needs that the loss cannot meet
        name, keys = "still", ("still_x",)
        needs = frozenset({"scores", "score_grad", "embedding_grad"})

        def fewer_needs(self):
            return frozenset({"score_grad"}), "pass something else"

        def compute(self, batch):  # pragma: no cover - never served here
            return {}

    embeddings = torch.randn(16, 8, requires_grad=True)
    labels = torch.arange(4).repeat_interleave(4)
    with pytest.warns(UserWarning, match="cannot be logged"), gradlab.Monitor(
        tmp_path / "with", quantities=[Suspects(every(1), labels=lambda: labels),
                                       NeedsTheGradientStill(every(1))]) as monitor:  # fmt: skip
        monitor.watch(lambda rows, classes: rows.pow(2).mean())(embeddings, labels).backward()
        assert monitor.step() is None
    reason, advice = monitor.not_logged["suspects"].rsplit("; ", 1)
    assert reason.startswith("needs dL/dS") and "exposes no score matrix" in reason
    assert advice == "Suspects(..., gradient=False) logs its other keys without dL/dS"
    assert "pass something else" not in monitor.not_logged["still"]
    with gradlab.Monitor(tmp_path / "without", quantities=[
            Suspects(every(1), labels=lambda: labels, gradient=False)]) as monitor:  # fmt: skip
        monitor.watch(lambda rows, classes: rows.pow(2).mean())(embeddings, labels).backward()
        record = monitor.step()
    assert {"suspects_count", "suspects_per_query", "suspects_top_k_share"} <= set(record)
