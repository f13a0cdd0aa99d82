"""Which sentence-transformers similarity call becomes which recorded matrix (tiny models).

References: float64 cosine matrices of the models' embeddings, GIST's guide mask and
cross-entropy written out on leaf matrices (sentence-transformers 6.2's GISTEmbedLoss), and
positives placed by hand.
"""

import math

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("sentence_transformers")

from sentence_transformers.sentence_transformer import losses
from sentence_transformers.util import cos_sim

from gradlab import GradlabError
from gradlab.integrations.sentence_transformers import (
    RecordingSimilarity,
    record_scores,
    sentence_transformers_adapter,
)
from gradlab.integrations.transformers import GradlabTrainerCallback, LossForward
from tests.helpers.hf_models import (
    bert_sentence_model,
    caption_pairs,
    captured,
    cosine64,
    embed,
    sentence_features,
    static_model,
)


@pytest.mark.parametrize(
    ("contrast_anchors", "contrast_positives"), [(False, False), (True, False), (False, True)]
)
def test_gist_joins_the_negatives_whichever_extra_blocks_it_contrasts(tmp_path, contrast_anchors,
                                                                     contrast_positives):
    model = bert_sentence_model(tmp_path / "model", seed=0)
    guide = bert_sentence_model(tmp_path / "guide", seed=1)
    anchors, positives = caption_pairs(6)
    negatives = caption_pairs(12)[1][6:]
    loss = record_scores(losses.GISTEmbedLoss(
        model, guide, temperature=0.05, margin=0.05, contrast_anchors=contrast_anchors,
        contrast_positives=contrast_positives))  # fmt: skip
    batch = captured(loss, sentence_features(model, anchors, positives, negatives))
    (capture,) = batch.score_captures
    a, p, n = (embed(model, texts) for texts in (anchors, positives, negatives))
    ga, gp, gn = (embed(guide, texts) for texts in (anchors, positives, negatives))
    guided_positive = cosine64(ga, gp).diagonal().unsqueeze(1)
    blocks = [(a, p, ga, gp, True)]
    if contrast_anchors:
        blocks.append((a, a, ga, ga, False))
    if contrast_positives:
        blocks.append((p, p, gp, gp, False))
    blocks.append((a, n, ga, gn, False))
    leaves, masks = [], []
    for first, second, guide_first, guide_second, paired in blocks:
        mask = cosine64(guide_first, guide_second) > guided_positive - 0.05
        if paired:
            mask &= ~torch.eye(6, dtype=torch.bool)
        leaves.append(cosine64(first, second).requires_grad_())
        masks.append(mask)
    logits = torch.cat([leaf.masked_fill(mask, -math.inf)
                        for leaf, mask in zip(leaves, masks, strict=True)], 1)  # fmt: skip
    F.cross_entropy(logits / 0.05, torch.arange(6)).backward()
    assert capture.scores.shape == (6, 12)
    torch.testing.assert_close(capture.scores.to(torch.float64),
                               torch.cat([leaves[0], leaves[-1]], 1).detach(), atol=1e-5, rtol=0)
    torch.testing.assert_close(capture.grad.to(torch.float64),
                               torch.cat([leaves[0].grad, leaves[-1].grad], 1), atol=1e-5, rtol=0)
    assert torch.equal(capture.candidates, ~torch.cat([masks[0], masks[-1]], 1))
    positives_expected = torch.zeros(6, 12, dtype=torch.bool)
    positives_expected[:, :6] = torch.eye(6, dtype=torch.bool)
    assert torch.equal(capture.positives, positives_expected)
    # The step's layout leaves out the pairs the guide masked; its features are the anchors
    # against the positives and negatives (GIST's [B, 1, d] x [1, C, d] operands as rows).
    assert torch.equal(batch.layout.candidate_mask, ~torch.cat([masks[0], masks[-1]], 1))
    queries, candidates = batch.features
    torch.testing.assert_close(queries.to(torch.float64), a, atol=1e-6, rtol=0)
    torch.testing.assert_close(candidates.to(torch.float64), torch.cat([p, n]), atol=1e-6, rtol=0)


@pytest.mark.parametrize("mode", ["joint"])
def test_mnrl_with_three_directions_records_query_to_doc_and_doc_to_query_only(mode):
    model = static_model()
    anchors, positives = caption_pairs(5)
    loss = losses.MultipleNegativesRankingLoss(
        model, similarity_fct=RecordingSimilarity(), partition_mode=mode,
        directions=("query_to_doc", "query_to_query", "doc_to_query"))  # fmt: skip
    i2t, t2i = captured(loss, sentence_features(model, anchors, positives)).score_captures
    scores = cosine64(embed(model, anchors), embed(model, positives))
    assert (i2t.direction, t2i.direction) == ("i2t", "t2i")
    torch.testing.assert_close(i2t.scores.to(torch.float64), scores, atol=1e-5, rtol=0)
    torch.testing.assert_close(t2i.scores.to(torch.float64), scores, atol=1e-5, rtol=0)
    eye = torch.eye(5, dtype=torch.bool)
    assert torch.equal(i2t.positives, eye) and torch.equal(t2i.positives, eye)


def test_two_calls_of_the_loss_in_one_listening_are_stitched_per_direction_in_order():
    model = static_model()
    anchors, positives = caption_pairs(4)
    loss = losses.MultipleNegativesRankingLoss(model, similarity_fct=RecordingSimilarity(),
                                               directions=("query_to_doc", "doc_to_query"))
    adapter = sentence_transformers_adapter(loss, "scores")
    with adapter.listening(score_grad=True) as (recorded, _):
        value = loss(sentence_features(model, anchors, positives), None)
    batch = adapter.capture([], value, 0.01, recorded=recorded, score_grad=True)
    assert [capture.direction for capture in batch.score_captures] == ["i2t", "t2i"]


def test_the_adapter_reads_a_recording_loss_or_its_loss_forward_and_nothing_else():
    model = static_model()
    loss = losses.MultipleNegativesRankingLoss(model, similarity_fct=RecordingSimilarity())
    assert sentence_transformers_adapter(loss, None) is not None
    assert sentence_transformers_adapter(loss, "scores") is not None
    assert sentence_transformers_adapter(LossForward(loss), None) is not None
    assert sentence_transformers_adapter(loss, "embeddings") is None
    # the similarity itself: its similarity_fct is cos_sim, not a RecordingSimilarity
    assert sentence_transformers_adapter(RecordingSimilarity(), None) is None
    assert sentence_transformers_adapter(torch.nn.Linear(2, 2), None) is None  # none at all
    assert sentence_transformers_adapter(len, None) is None
    anchors, positives = caption_pairs(4)
    batch = captured(LossForward(loss), sentence_features(model, anchors, positives))
    (capture,) = batch.score_captures
    scores = cosine64(embed(model, anchors), embed(model, positives))
    torch.testing.assert_close(capture.scores.to(torch.float64), scores, atol=1e-5, rtol=0)


def test_the_recorder_sees_only_matrices_with_a_gradient_and_the_operands_during_the_call():
    similarity = RecordingSimilarity()
    seen = []

    def recorder(direction, matrix, mask):
        seen.append((direction, matrix.shape, mask, [x.shape for x in similarity.operands]))

    similarity.score_recorder = recorder
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(5, 4)
    similarity(a.detach(), b)  # no gradient: not recorded
    matrix = similarity(a, b)
    assert seen == [(None, (3, 5), None, [(3, 4), (5, 4)])]
    torch.testing.assert_close(matrix, cos_sim(a, b), atol=0, rtol=0)
    assert similarity.operands is None  # kept only while the recorder runs

    def failing(direction, matrix, mask):
        raise RuntimeError("recorder failed")

    similarity.score_recorder = failing
    with pytest.raises(RuntimeError, match="recorder failed"):
        similarity(a, b)
    assert similarity.operands is None


def test_the_error_messages_name_the_loss_and_what_to_check():
    with pytest.raises(GradlabError, match=r"^similarity_fct must be a callable \(a, b\) -> "
                       r"\[Q, C\] matrix, or None for cos_sim; got int 3$"):
        RecordingSimilarity(3)
    loss = losses.MultipleNegativesRankingLoss(static_model(), similarity_fct=RecordingSimilarity())
    adapter = sentence_transformers_adapter(loss, None)
    with adapter.listening(score_grad=True) as (recorder, _):
        pass  # a call whose similarity never ran: the stitcher holds nothing, no pair shape
    for recorded in ([], recorder):
        with pytest.raises(GradlabError) as caught:
            adapter.capture([], None, 0.01, recorded=recorded)
        message = str(caught.value)
        assert message.startswith("the watched loss MultipleNegativesRankingLoss recorded no "
                                  "score matrix with a gradient: is its similarity_fct the "
                                  "RecordingSimilarity the Monitor watches")  # fmt: skip
        assert message.endswith("and does the call run with gradients enabled?")


def test_names_and_rewrapping():
    assert RecordingSimilarity(torch.nn.CosineSimilarity(dim=-1)).__name__ == "CosineSimilarity"
    assert RecordingSimilarity(cos_sim).__name__ == "cos_sim"
    loss = losses.MultipleNegativesRankingLoss(static_model(), similarity_fct=RecordingSimilarity())
    similarity = loss.similarity_fct
    assert record_scores(loss) is loss and loss.similarity_fct is similarity  # not wrapped twice
    plain = losses.MultipleNegativesRankingLoss(static_model())
    record_scores(plain)
    assert type(plain.similarity_fct) is RecordingSimilarity
    assert plain.similarity_fct.similarity_fct is cos_sim
    with pytest.raises(GradlabError, match="similarity_fct; Linear has none"):
        record_scores(torch.nn.Linear(2, 2))  # the loss's class is named
    # a watched module keeps its class; its forward is named after it (as the Monitor names it)
    watched = GradlabTrainerCallback().watch(
        losses.MultipleNegativesRankingLoss(static_model(), similarity_fct=RecordingSimilarity())
    )
    assert watched.forward.__name__ == "MultipleNegativesRankingLoss"


class GatheringLoss(torch.nn.Module):
    """A loss in sentence-transformers' layout that compares its rank's anchors with every
    rank's documents (given here, as ``gather_across_devices`` would gather them)."""

    def __init__(self, documents, rank, gather_across_devices=True):
        super().__init__()
        self.similarity_fct = RecordingSimilarity()
        self.documents, self.rank = documents, rank
        self.gather_across_devices = gather_across_devices

    def forward(self, anchors, _labels):
        scores = self.similarity_fct(anchors, self.documents) * 20.0
        labels = torch.arange(len(anchors)) + self.rank * len(anchors)
        return F.cross_entropy(scores, labels)


@pytest.mark.parametrize("gather", [True, False])
def test_gathered_documents_put_the_positive_of_row_i_at_rank_times_b_plus_i(monkeypatch,
                                                                              gather):
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda group=None: 1)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: 2)
    generator = torch.Generator().manual_seed(3)
    documents = torch.randn(8, 5, generator=generator)
    anchors = (documents[4:] + 0.1 * torch.randn(4, 5, generator=generator)).requires_grad_()
    (capture,) = captured(GatheringLoss(documents, 1, gather), anchors).score_captures
    expected = torch.zeros(4, 8, dtype=torch.bool)
    for row in range(4):
        expected[row, 4 + row if gather else row] = True  # without gathering: no offset
    assert torch.equal(capture.positives, expected)
    torch.testing.assert_close(capture.scores.to(torch.float64),
                               cosine64(anchors.detach().double(), documents.double()),
                               atol=1e-6, rtol=0)  # fmt: skip


@pytest.mark.parametrize(("rank", "world", "gather"), [
    (0, 2, True), (1, 2, True), (0, 2, False), (1, 2, False), (0, 1, True)])  # fmt: skip
def test_gathered_candidates_give_the_geometry_no_features(monkeypatch, rank, world, gather):
    """This process's anchors against every process's documents: the modality gap mixed the
    local queries with the global candidates (rank 0 too, whose positives need no offset). One
    process gathers only its own documents: its geometry stands."""
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda group=None: rank)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: world)
    generator = torch.Generator().manual_seed(3)
    documents = torch.randn(4 * world if gather else 4, 5, generator=generator)
    anchors = torch.randn(4, 5, generator=generator).requires_grad_()
    batch = captured(GatheringLoss(documents, rank if gather else 0, gather), anchors)
    if gather and world > 1:
        assert batch.features is None and batch.compared is None
    else:
        queries, candidates = batch.features
        assert torch.equal(queries, anchors.detach()) and torch.equal(candidates, documents)


class CachedGatheringLoss(GatheringLoss):
    """The same, in MultipleNegativesRankingLoss's cached layout: ``query_to_doc`` only,
    computed in mini-batches of two anchors against every rank's documents."""

    directions = ("query_to_doc",)

    def forward(self, anchors, _labels):
        labels = torch.arange(len(anchors)) + self.rank * len(anchors)
        total = 0
        for start in range(0, len(anchors), 2):
            scores = self.similarity_fct(anchors[start:start + 2], self.documents) * 20.0
            total = total + F.cross_entropy(scores, labels[start:start + 2], reduction="sum")
        return total / len(anchors)


def test_gathered_mini_batches_offset_the_positives_by_rank_times_the_whole_local_batch(
    monkeypatch,
):
    # rank 1 of two, B = 4 anchors in mini-batches of 2: the positive of row i is column
    # 1 x 4 + i, not 1 x 2 + i (the mini-batch's size)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda group=None: 1)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: 2)
    generator = torch.Generator().manual_seed(6)
    documents = torch.randn(8, 5, generator=generator)
    anchors = (documents[4:] + 0.1 * torch.randn(4, 5, generator=generator)).requires_grad_()
    (capture,) = captured(CachedGatheringLoss(documents, 1), anchors).score_captures
    expected = torch.zeros(4, 8, dtype=torch.bool)
    expected[torch.arange(4), 4 + torch.arange(4)] = True
    assert torch.equal(capture.positives, expected)


class CountingLoss(GatheringLoss):
    """A loss of the user's own with a RecordingSimilarity that counts its degenerate batches
    (as gradlab's losses do) and has no ``gather_across_devices`` attribute."""

    degenerate_batches = 3

    def __init__(self, documents):
        super().__init__(documents, 0)
        del self.gather_across_devices


def test_a_loss_of_one_s_own_is_read_with_its_counts_and_no_offset(monkeypatch):
    generator = torch.Generator().manual_seed(4)
    documents = torch.randn(4, 5, generator=generator)
    anchors = (documents + 0.1 * torch.randn(4, 5, generator=generator)).requires_grad_()
    batch = captured(CountingLoss(documents), anchors)
    assert batch.degenerate_batches == 3  # the step reads the loss's own counts
    assert torch.equal(batch.score_captures[0].positives, torch.eye(4, dtype=torch.bool))
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda group=None: 1)
    batch = captured(CountingLoss(documents), anchors)  # no gather attribute: no offset
    assert torch.equal(batch.score_captures[0].positives, torch.eye(4, dtype=torch.bool))


def test_gathering_without_an_initialised_process_group_has_no_offset():
    generator = torch.Generator().manual_seed(5)
    documents = torch.randn(4, 5, generator=generator)
    anchors = (documents + 0.1 * torch.randn(4, 5, generator=generator)).requires_grad_()
    assert not torch.distributed.is_initialized()
    (capture,) = captured(GatheringLoss(documents, 0, True), anchors).score_captures
    assert torch.equal(capture.positives, torch.eye(4, dtype=torch.bool))


@pytest.mark.parametrize(("temperature", "scale"), [(0.05, 20.0), (0.0, None)])
def test_gist_s_softmax_scale_is_one_over_a_positive_temperature_only(tmp_path, temperature,
                                                                        scale):  # fmt: skip
    """GIST's logits are ``S / temperature``: its scale is ``1 / temperature``; a temperature of
    0 (GIST does not refuse it) gives no scale, not a division by zero."""
    model = bert_sentence_model(tmp_path / "model", seed=0)
    guide = bert_sentence_model(tmp_path / "guide", seed=1)
    loss = record_scores(losses.GISTEmbedLoss(model, guide, temperature=temperature))
    batch = captured(loss, sentence_features(model, *caption_pairs(4)))
    assert batch.softmax.scale == (pytest.approx(scale) if scale else None)
