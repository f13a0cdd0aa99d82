"""Which recorded matrix is which direction, and each direction's dL/dS (tiny offline models).

References are independent of gradlab: float64 re-implementations of each loss's formula
(sentence-transformers 6.2's MultipleNegativesRankingLoss and GISTEmbedLoss) with autograd on
leaf score matrices, and sentence-transformers' own plain losses where a cached or symmetric
loss must read the same.
"""

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("sentence_transformers")

from sentence_transformers.sentence_transformer import losses

import gradlab
from gradlab.integrations.sentence_transformers import (
    RecordingSimilarity,
    record_scores,
    sentence_transformers_adapter,
)
from gradlab.monitor import PRESETS, ChanceLevel, Loss, Temperature, every
from tests.helpers.hf_models import (
    bert_sentence_model,
    caption_pairs,
    captured,
    cosine64,
    embed,
    sentence_features,
    static_model,
)


def logged(loss, features, folder, quantities=None):
    """One Monitor step of ``loss`` on ``features``: the record and the run header."""
    options = {"quantities": quantities} if quantities else {"preset": "full"}
    with gradlab.Monitor(folder, every=1, **options) as monitor:
        monitor.watch(loss)(features, None).backward()
        record = monitor.step()
        header = dict(monitor.not_logged)
    return record, header


# --- GIST and CachedGIST ------------------------------------------------------------------------


def gist_reference(model, guide, anchors, positives, negatives, margin, temperature):
    """GIST's loss in float64 on leaf blocks [ap, aa, pp, an]: the ap and an blocks' scores,
    gradients and guide masks."""
    a, p, n = (embed(model, texts) for texts in (anchors, positives, negatives))
    ga, gp, gn = (embed(guide, texts) for texts in (anchors, positives, negatives))
    guided_positive = cosine64(ga, gp).diagonal().unsqueeze(1)
    blocks = [(a, p, ga, gp, True), (a, a, ga, ga, False), (p, p, gp, gp, False),
              (a, n, ga, gn, False)]  # fmt: skip
    leaves, masks = [], []
    for first, second, guide_first, guide_second, paired in blocks:
        mask = cosine64(guide_first, guide_second) > guided_positive - margin
        if paired:
            mask &= ~torch.eye(len(a), dtype=torch.bool)
        leaves.append(cosine64(first, second).requires_grad_())
        masks.append(mask)
    logits = torch.cat([leaf.masked_fill(mask, -math.inf)
                        for leaf, mask in zip(leaves, masks, strict=True)], 1)  # fmt: skip
    F.cross_entropy(logits / temperature, torch.arange(len(a))).backward()
    scores = torch.cat([leaves[0], leaves[3]], 1).detach()
    grad = torch.cat([leaves[0].grad, leaves[3].grad], 1)
    return scores, grad, ~torch.cat([masks[0], masks[3]], 1), (a, torch.cat([p, n]))


def test_cached_gist_records_what_gist_records_and_logs_the_same_values(tmp_path):
    model = bert_sentence_model(tmp_path / "model", seed=0)
    guide = bert_sentence_model(tmp_path / "guide", seed=1)
    anchors, positives = caption_pairs(8)
    negatives = caption_pairs(16)[1][8:]
    features = sentence_features(model, anchors, positives, negatives)
    scores, grad, candidates, (queries, columns) = gist_reference(
        model, guide, anchors, positives, negatives, margin=0.05, temperature=0.05)
    options = {"temperature": 0.05, "margin": 0.05}
    plain = record_scores(losses.GISTEmbedLoss(model, guide, **options))
    cached = record_scores(losses.CachedGISTEmbedLoss(model, guide, mini_batch_size=3, **options))
    for loss in (plain, cached):
        model.zero_grad()
        batch = captured(loss, features)
        (capture,) = batch.score_captures  # aa and pp are not recorded, not taken as queries
        assert capture.scores.shape == (8, 16)
        torch.testing.assert_close(capture.scores.to(torch.float64), scores, atol=1e-5, rtol=0)
        torch.testing.assert_close(capture.grad.to(torch.float64), grad, atol=1e-5, rtol=0)
        assert torch.equal(capture.candidates, candidates)
        assert torch.equal(capture.positives[:, :8], torch.eye(8, dtype=torch.bool))
        assert not capture.positives[:, 8:].any()
        torch.testing.assert_close(batch.features[0].to(torch.float64), queries, atol=1e-5,
                                   rtol=0)  # fmt: skip
        torch.testing.assert_close(batch.features[1].to(torch.float64), columns, atol=1e-5,
                                   rtol=0)  # fmt: skip
    records = []
    for index, loss in enumerate((plain, cached)):
        model.zero_grad()
        records.append(logged(loss, features, tmp_path / str(index))[0])
    keys = [key for key in records[0]
            if key.startswith(("anatomy_i2t_", "margin_", "geometry_"))]  # fmt: skip
    assert len(keys) == 11 + 5 + 6
    for key in keys:
        assert records[1][key] == pytest.approx(records[0][key], abs=1e-6, nan_ok=True), key
    # GIST ranks its own positive first for every anchor here: recall@1 from the reference
    positive = scores.diagonal()
    hardest = scores.masked_fill(~candidates | torch.eye(8, 16, dtype=torch.bool), -math.inf)
    recall = (positive > hardest.max(dim=1).values).double().mean().item()
    assert records[1]["margin_recall_at_1"] == pytest.approx(recall)


@pytest.mark.parametrize("loss_class", ["GISTEmbedLoss", "CachedGISTEmbedLoss"])
def test_gist_s_run_header_says_chance_level_and_temperature_do_not_apply(tmp_path, loss_class):
    model = bert_sentence_model(tmp_path / "model", seed=0)
    guide = bert_sentence_model(tmp_path / "guide", seed=1)
    anchors, positives = caption_pairs(6)
    options = {"mini_batch_size": 2} if loss_class.startswith("Cached") else {}
    loss = record_scores(getattr(losses, loss_class)(model, guide, **options))
    quantities = [kind(every(1)) for kind in PRESETS["default"]]
    quantities += [ChanceLevel(every(1)), Temperature(every(1), scale=1 / loss.temperature)]
    record, not_logged = logged(loss, sentence_features(model, anchors, positives),
                                tmp_path / "a", quantities)  # fmt: skip
    unmet = {"embedding_norm", "embedding_grad_norm"}  # read through the recorded matrices
    assert set(not_logged) == unmet | {"chance_level", "temperature"}
    assert not_logged["temperature"] == (
        f"does not apply to {loss_class} with contrast_anchors or contrast_positives (both on "
        "by default): its softmax also runs over the anchor-anchor and positive-positive "
        "blocks, which are not recorded; make it with contrast_anchors=False, "
        "contrast_positives=False to log the temperature")  # fmt: skip
    assert not_logged["chance_level"] == (
        f"does not apply to {loss_class}: its softmax runs over the columns its guide did not "
        "mask (a number per anchor) and the anchor-anchor and positive-positive blocks, not "
        "ln C of the recorded columns")  # fmt: skip
    assert "chance_level" not in record and "temperature_scale" not in record
    assert "margin_mean" in record  # a quantity with Temperature's needs still applies
    # One extra block is enough to leave Temperature out; without both, the recorded columns
    # are GIST's softmax and it applies.
    for contrasted, expected in (((False, True), {"chance_level", "temperature"}),
                                 ((True, False), {"chance_level", "temperature"}),
                                 ((False, False), {"chance_level"})):  # fmt: skip
        loss = record_scores(getattr(losses, loss_class)(
            model, guide, contrast_anchors=contrasted[0], contrast_positives=contrasted[1],
            temperature=0.05, **options))  # fmt: skip
        record, not_logged = logged(loss, sentence_features(model, anchors, positives),
                                    tmp_path / f"b{contrasted}", [Temperature(every(1)),
                                    *quantities[:-1]])  # fmt: skip
        assert set(not_logged) == unmet | expected, contrasted
        blocks = (" and the anchor-anchor and positive-positive blocks"
                  if any(contrasted) else "")  # without both, no such block to name
        assert not_logged["chance_level"] == (
            f"does not apply to {loss_class}: its softmax runs over the columns its guide did "
            f"not mask (a number per anchor){blocks}, not ln C of the recorded columns")
    # where it applies, Temperature without a scale reads GIST's: 1 / its temperature (not
    # 1 / the Monitor's tau of 0.01)
    assert record["temperature_scale"] == pytest.approx(20.0)


@pytest.mark.parametrize("loss_class", ["CachedGISTEmbedLoss"])  # GIST takes one negative
def test_gist_s_hard_negative_columns_are_one_block_each_in_order(tmp_path, loss_class):
    model = bert_sentence_model(tmp_path / "model", seed=0)
    guide = bert_sentence_model(tmp_path / "guide", seed=1)
    anchors, positives = caption_pairs(6)
    first, second = positives[2:] + positives[:2], positives[4:] + positives[:4]
    options = {"mini_batch_size": 4} if loss_class.startswith("Cached") else {}
    loss = record_scores(getattr(losses, loss_class)(model, guide, margin=-10.0, **options))
    features = sentence_features(model, anchors, positives, first, second)
    adapter = sentence_transformers_adapter(loss, None)
    with adapter.listening(score_grad=True) as (recorded, _):
        value = loss(features, None)
    batch = adapter.capture([], value, 0.25, recorded=recorded, score_grad=True)
    a, p, n1, n2 = (embed(model, texts) for texts in (anchors, positives, first, second))
    expected = cosine64(a, torch.cat([p, n1, n2]))  # the positives, then each negative column
    torch.testing.assert_close(batch.score_captures[0].scores.to(torch.float64), expected,
                               atol=1e-5, rtol=0)  # fmt: skip
    assert torch.equal(batch.loss, value.detach()) and batch.tau == 0.25  # the call's own


def test_a_loss_of_one_s_own_has_its_first_matrix_recorded_only():
    class TwoCalls(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.similarity_fct = RecordingSimilarity()

        def forward(self, pair, _labels):
            anchors, documents = pair
            scores = self.similarity_fct(anchors, documents)
            extra = self.similarity_fct(anchors, anchors)  # a regulariser: not a query block
            return F.cross_entropy(20 * scores, torch.arange(len(anchors))) + extra.mean()

    generator = torch.Generator().manual_seed(0)
    documents = torch.randn(4, 5, generator=generator, dtype=torch.float64)
    anchors = (documents + 0.1 * torch.randn(4, 5, generator=generator,
                                             dtype=torch.float64)).requires_grad_()
    (capture,) = captured(TwoCalls(), (anchors, documents)).score_captures
    leaf = cosine64(anchors.detach(), documents).requires_grad_()
    F.cross_entropy(20 * leaf, torch.arange(4)).backward()
    assert capture.scores.shape == (4, 4)
    torch.testing.assert_close(capture.grad, leaf.grad, atol=1e-10, rtol=0)


# --- MultipleNegativesRankingLoss with doc_to_query ---------------------------------------------


def test_per_direction_gives_each_direction_its_own_infonce_gradient_with_hard_negatives():
    model = static_model()
    anchors, positives = caption_pairs(8)
    negatives = positives[3:] + positives[:3]
    loss = losses.MultipleNegativesRankingLoss(
        model, scale=15.0, similarity_fct=RecordingSimilarity(),
        directions=("query_to_doc", "doc_to_query"), partition_mode="per_direction")
    batch = captured(loss, sentence_features(model, anchors, positives, negatives))
    i2t, t2i = batch.score_captures
    q, p, n = (embed(model, texts) for texts in (anchors, positives, negatives))
    # Each direction's InfoNCE term on its own leaf: queries against [positives, negatives];
    # each positive document against the queries. The loss is their mean.
    forward = cosine64(q, torch.cat([p, n])).requires_grad_()
    backward = cosine64(q, p).requires_grad_()  # [queries, documents]: columns are queries
    labels = torch.arange(8)
    ((F.cross_entropy(15.0 * forward, labels) + F.cross_entropy(15.0 * backward.T, labels))
     / 2).backward()  # fmt: skip
    assert i2t.grad.shape == (8, 16) and t2i.grad.shape == (8, 8)
    torch.testing.assert_close(i2t.grad.to(torch.float64), forward.grad, atol=1e-5, rtol=0)
    torch.testing.assert_close(t2i.grad.to(torch.float64), backward.grad, atol=1e-5, rtol=0)
    # The pair's net gradient is the loss's (sentence-transformers subtracts the positive once,
    # from query_to_doc): written on one shared leaf of the pair scores.
    shared = cosine64(q, p).requires_grad_()
    extra = cosine64(q, n).requires_grad_()
    log_z = (torch.logsumexp(15.0 * torch.cat([shared, extra], 1), dim=1)
             + torch.logsumexp(15.0 * shared.T, dim=1)) / 2  # fmt: skip
    (-(15.0 * shared.diagonal() - log_z)).mean().backward()
    torch.testing.assert_close((i2t.grad[:, :8] + t2i.grad).to(torch.float64), shared.grad,
                               atol=1e-5, rtol=0)  # fmt: skip


def test_joint_mode_splits_the_target_by_each_direction_s_softmax_mass():
    model = static_model()
    anchors, positives = caption_pairs(6)
    loss = losses.MultipleNegativesRankingLoss(
        model, scale=10.0, similarity_fct=RecordingSimilarity(),
        directions=("query_to_doc", "doc_to_query"), partition_mode="joint")
    i2t, t2i = captured(loss, sentence_features(model, anchors, positives)).score_captures
    q, p = embed(model, anchors), embed(model, positives)
    # One softmax per pair over [query_i vs documents, document_i vs queries]; the target
    # -s S_ii written as the two copies weighted by their blocks' softmax mass (held fixed).
    forward = cosine64(q, p).requires_grad_()
    backward = cosine64(p, q).requires_grad_()  # rows: documents as queries
    logits = 10.0 * torch.cat([forward, backward], 1)
    mass = torch.softmax(logits.detach(), dim=1)[:, 6:].sum(dim=1)
    target = (1 - mass) * forward.diagonal() + mass * backward.diagonal()
    (torch.logsumexp(logits, dim=1) - 10.0 * target).mean().backward()
    torch.testing.assert_close(i2t.grad.to(torch.float64), forward.grad, atol=1e-5, rtol=0)
    torch.testing.assert_close(t2i.grad.to(torch.float64), backward.grad.T, atol=1e-5, rtol=0)
    assert (t2i.grad.diagonal() < 0).all()


@pytest.mark.parametrize("cached", [False, True])
def test_the_symmetric_loss_s_t2i_anatomy_is_that_of_the_loss_on_documents_as_queries(tmp_path,
                                                                                     cached):
    model = bert_sentence_model(tmp_path / "model") if cached else static_model()
    anchors, positives = caption_pairs(10)
    options = {"scale": 20.0, "similarity_fct": RecordingSimilarity(),
               "directions": ("query_to_doc", "doc_to_query"), "partition_mode": "per_direction"}
    if cached:
        symmetric = losses.CachedMultipleNegativesRankingLoss(model, mini_batch_size=4, **options)
    else:
        symmetric = losses.MultipleNegativesRankingLoss(model, **options)
    one_way = losses.MultipleNegativesRankingLoss(model, scale=20.0,
                                                  similarity_fct=RecordingSimilarity())
    record, _ = logged(symmetric, sentence_features(model, anchors, positives), tmp_path / "s")
    forward, _ = logged(one_way, sentence_features(model, anchors, positives), tmp_path / "f")
    swapped, _ = logged(one_way, sentence_features(model, positives, anchors), tmp_path / "b")
    keys = [key for key in swapped if key.startswith("anatomy_i2t_")]
    assert len(keys) == 11
    for key in keys:  # each direction reads as that direction's InfoNCE alone
        assert record[key] == pytest.approx(forward[key], abs=1e-6), key
        mirrored = key.replace("i2t", "t2i")
        assert record[mirrored] == pytest.approx(swapped[key], abs=1e-6), mirrored
    assert record["anatomy_t2i_active_negatives_mean"] > 1
    assert not math.isnan(record["anatomy_t2i_active_rank_depth"])


@pytest.mark.parametrize("directions", [("query_to_doc",), ("query_to_doc", "doc_to_query")])
def test_temperature_takes_the_loss_s_own_directions(tmp_path, directions):
    # dL/d log s by autograd on a float64 re-implementation of the loss with s = exp(alpha):
    # Temperature(), given neither scale nor direction, must log it at the loss's own scale.
    model = static_model()
    anchors, positives = caption_pairs(8)
    negatives = positives[2:] + positives[:2]
    loss = losses.MultipleNegativesRankingLoss(
        model, scale=49.0, similarity_fct=RecordingSimilarity(), directions=directions,
        partition_mode="per_direction")  # fmt: skip
    features = sentence_features(model, anchors, positives, negatives)
    record, _ = logged(loss, features, tmp_path, quantities=[Temperature(every(1))])
    assert record["temperature_scale"] == 49.0  # its scale, not 1 / its 1 / scale (49.00...01)
    q, p, n = (embed(model, texts) for texts in (anchors, positives, negatives))
    alpha = torch.tensor(math.log(49.0), dtype=torch.float64, requires_grad=True)
    labels = torch.arange(8)
    terms = [F.cross_entropy(alpha.exp() * cosine64(q, torch.cat([p, n])), labels)]
    if "doc_to_query" in directions:
        terms.append(F.cross_entropy(alpha.exp() * cosine64(p, q), labels))
    (sum(terms) / len(terms)).backward()
    assert record["temperature_log_scale_grad"] == pytest.approx(float(alpha.grad), abs=1e-5)


def test_temperature_reads_a_learnable_scale_put_in_the_loss_s_place(tmp_path):
    # loss.scale = nn.Parameter(...): Temperature() logged 1 / tau (100) and warned that the
    # loss declares no scale; the closed form is checked against the parameter's own gradient
    model = static_model()
    anchors, positives = caption_pairs(8)
    loss = losses.MultipleNegativesRankingLoss(model, similarity_fct=RecordingSimilarity())
    loss.scale = torch.nn.Parameter(torch.tensor(20.0))
    features = sentence_features(model, anchors, positives)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record, _ = logged(loss, features, tmp_path, quantities=[Temperature(every(1))])
    assert [str(w.message) for w in caught if "Temperature" in str(w.message)] == []
    assert record["temperature_scale"] == 20.0
    # dL/d log s = s dL/ds: the parameter's gradient from the backward in logged()
    assert record["temperature_log_scale_grad"] == pytest.approx(
        20.0 * float(loss.scale.grad), abs=1e-5)
    assert abs(record["temperature_log_scale_grad"]) > 1e-3


def test_temperature_reads_a_learnable_temperature_put_in_gist_s_place(tmp_path):
    # GIST's scale is 1 / its temperature, a Parameter as well as a number
    model = bert_sentence_model(tmp_path / "model", seed=0)
    guide = bert_sentence_model(tmp_path / "guide", seed=1)
    anchors, positives = caption_pairs(6)
    loss = record_scores(losses.GISTEmbedLoss(model, guide, contrast_anchors=False,
                                              contrast_positives=False))  # fmt: skip
    loss.temperature = torch.nn.Parameter(torch.tensor(0.05))
    record, _ = logged(loss, sentence_features(model, anchors, positives), tmp_path / "run",
                       [Temperature(every(1))])  # fmt: skip
    assert record["temperature_scale"] == pytest.approx(1 / 0.05, rel=1e-6)


def test_contrastive_tension_in_batch_leaves_out_what_reads_one_direction(tmp_path):
    # its loss is (CE(S) + CE(S^T)) / 2 of one recorded matrix S: Temperature's closed form
    # came out as the rows' alone (-0.44 where the parameter's gradient was -0.46) and the
    # anatomy read both directions' dL/dS as one, silently
    model = static_model()
    anchors, positives = caption_pairs(8)
    loss = losses.ContrastiveTensionLossInBatchNegatives(
        model, similarity_fct=RecordingSimilarity())
    features = sentence_features(model, anchors, positives)
    quantities = [kind(every(1)) for kind in PRESETS["full"]]
    quantities += [ChanceLevel(every(1)), Temperature(every(1), scale=20.0)]
    record, not_logged = logged(loss, features, tmp_path, quantities)
    reason = ("does not apply to ContrastiveTensionLossInBatchNegatives: its loss is the mean "
              "of a softmax over the rows and one over the columns of the one matrix it "
              "records, so its dL/dS holds both directions, which this reads as one")
    assert {name: not_logged[name] for name in ("anatomy", "chance_level", "temperature")} == {
        "anatomy": reason, "chance_level": reason, "temperature": reason}
    assert not any(key.startswith(("anatomy_", "temperature_", "chance_")) for key in record)
    assert "margin_mean" in record and "loss" in record


MNRL_SOFTMAX_SETTINGS = {
    "query_to_query": ({"directions": ("query_to_doc", "query_to_query")},
                       "its directions ['query_to_query'] add score blocks to its softmax, "
                       "which are not recorded"),
    "all four": ({"directions": ("query_to_doc", "query_to_query", "doc_to_query",
                                 "doc_to_doc")},
                 "its directions ['query_to_query', 'doc_to_doc'] add score blocks to its "
                 "softmax, which are not recorded"),
    "joint": ({"directions": ("query_to_doc", "doc_to_query"), "partition_mode": "joint"},
              "partition_mode='joint' puts its directions ['query_to_doc', 'doc_to_query'] in "
              "one softmax, not one per recorded direction"),
    "hardness": ({"hardness_mode": "in_batch_negatives", "hardness_strength": 5.0},
                 "hardness_mode='in_batch_negatives' weights its negatives by their scores: its "
                 "softmax is not that of the recorded scores"),
    "hardness of strength 0": ({"hardness_mode": "in_batch_negatives",
                                "hardness_strength": 0.0}, None),  # no weighting at all
    "default": ({}, None),
    "symmetric per direction": ({"directions": ("query_to_doc", "doc_to_query"),
                                 "partition_mode": "per_direction"}, None),
}


@pytest.mark.parametrize("setting", MNRL_SOFTMAX_SETTINGS, ids=MNRL_SOFTMAX_SETTINGS.keys())
def test_chance_level_and_temperature_say_why_a_softmax_beyond_the_recorded_does_not_apply(
    tmp_path, setting
):
    """A new user's trial: with query_to_query blocks, a joint softmax over both directions or
    hardness weighting, Temperature logged dL/d log s of the recorded blocks alone (the wrong
    sign with query_to_query) and ChanceLevel ln B, though the loss's softmax was wider."""
    options, reason = MNRL_SOFTMAX_SETTINGS[setting]
    model = static_model()
    anchors, positives = caption_pairs(8)
    loss = losses.MultipleNegativesRankingLoss(model, scale=20.0,
                                               similarity_fct=RecordingSimilarity(), **options)
    record, not_logged = logged(loss, sentence_features(model, anchors, positives), tmp_path,
                                [ChanceLevel(every(1)), Temperature(every(1)),
                                 Loss(every(1))])  # fmt: skip
    if reason is None:
        assert not not_logged and record["chance_level"] == pytest.approx(math.log(8))
        assert record["temperature_scale"] == pytest.approx(20.0)
    else:
        expected = f"does not apply to MultipleNegativesRankingLoss: {reason}"
        assert not_logged == {"chance_level": expected, "temperature": expected}
        assert "chance_level" not in record and "temperature_scale" not in record


class TensionOfMyOwn(losses.ContrastiveTensionLossInBatchNegatives):
    """A user's subclass (to capture its inputs, say): the same loss."""


@pytest.mark.parametrize("loss_class", [losses.ContrastiveTensionLossInBatchNegatives,
                                        TensionOfMyOwn])
def test_contrastive_tension_s_two_directions_leave_temperature_out_subclassed_too(
    tmp_path, loss_class
):
    # a subclass was not recognised by its class name: Temperature logged 1 / tau = 100 as the
    # scale of a loss that multiplies by its own logit_scale.exp() (20), and a closed form of
    # one direction at that made-up scale
    model = static_model(seed=0)
    loss = record_scores(loss_class(model, scale=20.0))
    _, not_logged = logged(loss, sentence_features(model, caption_pairs(6)[0]), tmp_path / "a",
                           [Temperature(every(1)), ChanceLevel(every(1))])  # fmt: skip
    reason = (f"does not apply to {loss_class.__name__}: its loss is the mean of a softmax over "
              "the rows and one over the columns of the one matrix it records, so its dL/dS "
              "holds both directions, which this reads as one")  # fmt: skip
    assert not_logged == {"temperature": reason, "chance_level": reason}
