"""A score matrix of the user's own loss beyond cosines' range: the quantities that read it
through SmoothAP's sigmoid at the Monitor's tau (P, the gradient counts) describe that sigmoid,
not the loss, and the first step that logs one says so once, with the largest entry."""

import warnings

import pytest
import torch

import gradlab
from gradlab.monitor import Margins, OperatingRegion, Quantity, every

B = 16
LABELS = torch.arange(B // 4).repeat_interleave(4)
EYE = torch.eye(B, dtype=torch.bool)
POSITIVES = (LABELS[:, None] == LABELS[None]) & ~EYE


def supcon(scores, positives):  # a user's multi-positive loss on a score matrix
    logits = scores.masked_fill(EYE, float("-inf"))
    log_p = logits - logits.logsumexp(dim=1, keepdim=True)
    return -(log_p.masked_fill(~positives, 0).sum(1) / positives.sum(1)).mean()


def _embeddings(seed, norm):
    generator = torch.Generator().manual_seed(seed)
    rows = torch.nn.functional.normalize(torch.randn(B, 8, generator=generator), dim=1)
    return norm * rows


def _said(tmp_path, norms, quantities=None):
    """The scores-beyond-cosines warnings of one run, a step per embedding norm."""
    options = {"quantities": quantities} if quantities else {"every": 1}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, **options) as monitor:
            watched = monitor.watch(supcon, inputs="in_batch_scores")
            for step, norm in enumerate(norms):
                embeddings = _embeddings(step, norm).requires_grad_()
                watched(embeddings @ embeddings.T, POSITIVES).backward()
                monitor.step()
    return [w for w in caught if "cosine scores in [-1, 1]" in str(w.message)]


def test_dot_products_are_said_once_with_their_largest_entry(tmp_path):
    said = _said(tmp_path, [5.0, 5.0])
    assert len(said) == 1, [str(w.message) for w in said]
    assert said[0].category is RuntimeWarning  # as the Monitor's other warnings of a run
    message = str(said[0].message)
    rows = _embeddings(0, 5.0)  # the diagonal, no candidate in-batch, is not read
    largest = float((rows @ rows.T).masked_fill(EYE, 0.0).abs().amax())
    assert largest > 1.5
    assert message.startswith(f"gradlab.Monitor: step 0: the watched score matrix holds values up "
                              f"to {largest:.4g} in magnitude, but operating_region, "
                              "gradient_counts read it through SmoothAP's sigmoid at the "
                              "Monitor's tau = 0.01")
    assert "give Monitor(tau=...) a width on your scores' scale" in message


def test_the_warning_points_at_the_training_loop(tmp_path):
    (said,) = _said(tmp_path, [5.0])
    assert said.filename == __file__  # the line that called monitor.step()


def test_cosines_are_not_said(tmp_path):
    assert _said(tmp_path, [1.0, 1.0]) == []


def test_a_run_without_a_quantity_at_tau_reads_nothing_and_says_nothing(tmp_path):
    assert _said(tmp_path, [5.0], quantities=[Margins(every(1))]) == []


def test_the_check_reads_the_first_step_with_a_quantity_at_tau_only(tmp_path):
    assert _said(tmp_path, [1.0, 5.0]) == []  # one host read per run: the first step's
    said = _said(tmp_path / "later", [5.0, 5.0],
                 quantities=[OperatingRegion(lambda step: step == 1)])  # fmt: skip
    assert [str(w.message).split(":")[1] for w in said] == [" step 1"]


def test_embeddings_of_any_norm_are_not_said(tmp_path):
    # on embeddings the Monitor scores cosines itself, whatever the rows' norms
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, every=1) as monitor:
            watched = monitor.watch(gradlab.SmoothAPLoss(0.05))
            watched(_embeddings(0, 50.0).requires_grad_(), LABELS).backward()
            monitor.step()
    assert [w for w in caught if "cosine scores" in str(w.message)] == []


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_scores_that_are_not_finite_are_left_to_the_not_finite_warning(tmp_path, value):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, every=1) as monitor:
            watched = monitor.watch(supcon, inputs="in_batch_scores")
            embeddings = _embeddings(0, 1.0).requires_grad_()
            scores = embeddings @ embeddings.T
            scores = scores.masked_fill(torch.eye(B, dtype=torch.bool).roll(1, 1), value)
            watched(scores, POSITIVES).backward()
            monitor.step()
    assert [w for w in caught if "cosine scores" in str(w.message)] == []


def test_negative_squared_distances_are_said_by_their_magnitude(tmp_path):
    # scores that are all <= 0 (a loss on -||x - y||^2): their magnitude is what is read
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, every=1) as monitor:
            watched = monitor.watch(supcon, inputs="in_batch_scores")
            embeddings = _embeddings(0, 3.0).requires_grad_()
            scores = -torch.cdist(embeddings, embeddings).square()
            watched(scores, POSITIVES).backward()
            monitor.step()
    said = [str(w.message) for w in caught if "cosine scores" in str(w.message)]
    rows = _embeddings(0, 3.0)
    largest = float(torch.cdist(rows, rows).square().max())
    assert len(said) == 1 and f"holds values up to {largest:.4g} in magnitude" in said[0], said


def _said_of(tmp_path, scores):
    """The scores-beyond-cosines warnings of one step on the score matrix ``scores``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, every=1) as monitor:
            watched = monitor.watch(supcon, inputs="in_batch_scores")
            watched(scores.clone().requires_grad_(), POSITIVES).backward()
            monitor.step()
    return [str(w.message) for w in caught if "cosine scores in [-1, 1]" in str(w.message)]


@pytest.mark.parametrize(("largest", "said"), [
    (1.0, False), (1.0 + 1e-3, False),  # a cosine rounded: at most 1, with 1e-3 to spare
    (1.0 + 2e-3, True), (1.5, True), (-1.5, True)])  # fmt: skip
def test_the_largest_magnitude_is_read_against_one_with_a_rounding_margin(tmp_path, largest,
                                                                          said):
    # float64, so that the margin's edge is a value the scores can hold exactly
    generator = torch.Generator().manual_seed(0)
    scores = torch.rand(B, B, generator=generator, dtype=torch.float64) * 0.9
    scores[0, 1] = largest
    told = _said_of(tmp_path, scores)
    assert len(told) == said, told
    if said:
        assert f"holds values up to {abs(largest):.4g} in magnitude" in told[0]



class TauOnEmpty(Quantity):
    """A quantity of one's own that reads the Monitor's tau, on empty batches too."""

    name = "tau_on_empty"
    keys = ("tau_seen",)
    needs = frozenset({"scores"})
    reads_tau = True
    reads_empty_batches = True

    def compute(self, batch):
        return {"tau_seen": batch.tau}


def _first_record(tmp_path, scores, positives):
    """The first record of a Monitor logging TauOnEmpty on ``scores``, and gradlab's warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, tau=0.05, quantities=[TauOnEmpty(every(1))]) as monitor:
            watched = monitor.watch(lambda s, p: s.sum(), inputs="scores")
            watched(scores.requires_grad_(), positives).backward()
            record = monitor.step()
    return record, [str(w.message) for w in caught if "gradlab" in str(w.message)]


def test_a_matrix_without_candidates_is_logged_without_a_word(tmp_path):
    # [4, 0]: no entry to compare with a cosine's range (a maximum over none has no value)
    record, said = _first_record(tmp_path, torch.zeros(4, 0), torch.zeros(4, 0, dtype=torch.bool))
    assert record == {"step": 0, "tau_seen": 0.05} and said == []


def test_a_matrix_of_one_entry_beyond_a_cosine_is_said(tmp_path):
    record, said = _first_record(tmp_path, torch.full((1, 1), 5.0), torch.ones(1, 1, dtype=bool))
    assert record == {"step": 0, "tau_seen": 0.05}
    assert len(said) == 1 and "holds values up to 5 in magnitude, but tau_on_empty" in said[0]
