"""A loss of one's own on a batch's score matrix against itself (``z @ z.T``), watched with
``inputs="in_batch_scores"``: each query's own column is no candidate, whatever it holds."""

import math

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
        "compared with itself gives a square matrix; the call's arguments: "
        "args[0]=Tensor[3, 4], args[1]=Tensor[3, 4]"
    )
