"""RecordingSimilarity: the score matrices of sentence-transformers losses, read by a Monitor.

References are independent: float64 cosine matrices of the model's embeddings and dL/dS from
float64 re-implementations of each loss's formula (sentence-transformers 6.2's layout), with
autograd on leaf score matrices.
"""

import functools
import math
import re

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("sentence_transformers")
pytest.importorskip("datasets")

from sentence_transformers.sentence_transformer import losses

import gradlab
from gradlab import GradlabError
from gradlab.integrations.sentence_transformers import (
    RecordingSimilarity,
    record_scores,
    sentence_transformers_adapter,
)
from gradlab.integrations.transformers import GradlabTrainerCallback
from gradlab.monitor import read_jsonl
from tests.helpers.hf_models import (
    bert_sentence_model,
    caption_pairs,
    captured,
    cosine64,
    embed,
    sentence_features,
    sentence_training_arguments,
    static_model,
)
from tests.helpers.watch_refusals import watch_refusals
from tests.reference import geometry_loops as loops


def test_mnrl_records_the_query_to_doc_matrix_with_hard_negatives_past_b():
    model = static_model()
    anchors, positives = caption_pairs(8)
    negatives = positives[1:] + positives[:1]  # a hard negative per row, column B + i
    loss = losses.MultipleNegativesRankingLoss(model, scale=20.0,
                                               similarity_fct=RecordingSimilarity())  # fmt: skip
    batch = captured(loss, sentence_features(model, anchors, positives, negatives))
    (capture,) = batch.score_captures
    scores = cosine64(embed(model, anchors), torch.cat([embed(model, positives),
                                                        embed(model, negatives)]))  # fmt: skip
    assert capture.direction == "i2t" and capture.scores.shape == (8, 16)
    torch.testing.assert_close(capture.scores.to(torch.float64), scores, atol=1e-5, rtol=0)
    expected_positives = torch.zeros(8, 16, dtype=torch.bool)
    for row in range(8):
        expected_positives[row, row] = True  # columns past B: hard negatives only
    assert torch.equal(capture.positives, expected_positives)
    # InfoNCE: dL/dS = scale (softmax(scale S) - onehot) / B, written out in float64.
    grad = torch.zeros(8, 16, dtype=torch.float64)
    for row in range(8):
        exps = [math.exp(20.0 * float(value)) for value in scores[row]]
        for column in range(16):
            onehot = 1.0 if column == row else 0.0
            grad[row, column] = 20.0 * (exps[column] / sum(exps) - onehot) / 8
    torch.testing.assert_close(capture.grad.to(torch.float64), grad, atol=1e-5, rtol=0)
    assert torch.equal(batch.scores, capture.scores)  # the step's score matrix


def test_the_geometry_is_that_of_the_anchors_against_positives_and_hard_negatives(tmp_path):
    model = static_model()
    anchors, positives = caption_pairs(8)
    negatives = positives[2:] + positives[:2]
    loss = losses.MultipleNegativesRankingLoss(model, scale=20.0,
                                               similarity_fct=RecordingSimilarity())  # fmt: skip
    with gradlab.Monitor(tmp_path, preset="default", every=1) as monitor:
        monitor.watch(loss)(sentence_features(model, anchors, positives, negatives),
                            None).backward()  # fmt: skip
        record = monitor.step()
    a = embed(model, anchors).tolist()
    b = torch.cat([embed(model, positives), embed(model, negatives)]).tolist()
    diagonal = [[column == row for column in range(16)] for row in range(8)]
    expected = loops.logged_geometry(a, b, diagonal)
    assert len(expected) == 6
    for key, value in expected.items():
        assert record[key] == pytest.approx(value, rel=1e-5, abs=1e-9), key


def test_mnsrl_records_the_symmetric_term_as_t2i():
    model = static_model()
    anchors, positives = caption_pairs(6)
    with pytest.warns(DeprecationWarning):
        loss = losses.MultipleNegativesSymmetricRankingLoss(
            model, scale=10.0, similarity_fct=RecordingSimilarity())
    batch = captured(loss, sentence_features(model, anchors, positives))
    i2t, t2i = batch.score_captures
    assert (i2t.direction, t2i.direction) == ("i2t", "t2i")
    scores = cosine64(embed(model, anchors), embed(model, positives))
    # Each direction's own InfoNCE term in float64, on its own leaf copy of the pair scores:
    # (CE(s S) + CE(s S.T)) / 2 is the loss, each direction's target on its own positive.
    forward = scores.clone().requires_grad_()
    backward = scores.clone().requires_grad_()
    labels = torch.arange(6)
    ((F.cross_entropy(10.0 * forward, labels) + F.cross_entropy(10.0 * backward.T, labels))
     / 2).backward()  # fmt: skip
    torch.testing.assert_close(i2t.grad.to(torch.float64), forward.grad, atol=1e-5, rtol=0)
    torch.testing.assert_close(t2i.grad.to(torch.float64), backward.grad, atol=1e-5, rtol=0)
    assert (t2i.grad.diagonal() < 0).all() and (i2t.grad.diagonal() < 0).all()
    assert torch.equal(t2i.positives, torch.eye(6, dtype=torch.bool))


@pytest.mark.parametrize("directions", [("query_to_doc",), ("query_to_doc", "doc_to_query")])
def test_cached_mnrl_stitches_its_mini_batches_into_mnrl_s_matrix_and_anatomy(tmp_path,
                                                                            directions):
    model = bert_sentence_model(tmp_path / "bert")
    anchors, positives = caption_pairs(12)
    features = sentence_features(model, anchors, positives)
    options = {"directions": directions, "partition_mode": "per_direction"}
    plain = losses.MultipleNegativesRankingLoss(model, similarity_fct=RecordingSimilarity(),
                                                **options)  # fmt: skip
    cached = losses.CachedMultipleNegativesRankingLoss(model, mini_batch_size=4,
                                                       similarity_fct=RecordingSimilarity(),
                                                       **options)  # fmt: skip
    one, stitched = captured(plain, features), captured(cached, features)
    assert len(stitched.score_captures) == len(directions)
    for first, second in zip(one.score_captures, stitched.score_captures, strict=True):
        assert second.scores.shape == (12, 12) and second.direction == first.direction
        torch.testing.assert_close(second.scores, first.scores, atol=1e-6, rtol=0)
        # float32 gradients near 1, summed by mini-batch or at once: they differ by a few
        # float32 ulps (1.07e-6 seen on an AMD EPYC), far below any error of the stitching
        torch.testing.assert_close(second.grad, first.grad, atol=1e-5, rtol=0)
        assert torch.equal(second.positives, torch.eye(12, dtype=torch.bool))
    records = []
    for index, loss in enumerate((plain, cached)):
        model.zero_grad()
        with gradlab.Monitor(tmp_path / str(index), preset="full", every=1) as monitor:
            monitor.watch(loss)(features, None).backward()
            records.append(monitor.step())
    keys = [key for key in records[0] if key.startswith(("anatomy_i2t_", "anatomy_t2i_"))]
    assert len(keys) == 11 * len(directions)
    keys += [key for key in records[0] if key.startswith("geometry_")]  # stitched features
    assert len(keys) == 11 * len(directions) + 6
    for key in keys:
        assert records[1][key] == pytest.approx(records[0][key], abs=1e-6, nan_ok=True), key


def test_gist_records_anchor_positive_and_negative_columns_without_masked_pairs(tmp_path):
    model = bert_sentence_model(tmp_path / "model", seed=0)
    guide = bert_sentence_model(tmp_path / "guide", seed=1)
    anchors, positives = caption_pairs(6)
    negatives = caption_pairs(12)[1][6:]  # other scenes: no score ties with the positives
    loss = record_scores(losses.GISTEmbedLoss(model, guide, temperature=0.05, margin=0.05))
    batch = captured(loss, sentence_features(model, anchors, positives, negatives))
    (capture,) = batch.score_captures
    a, p, n = (embed(model, texts) for texts in (anchors, positives, negatives))
    ga, gp, gn = (embed(guide, texts) for texts in (anchors, positives, negatives))
    guided_positive = cosine64(ga, gp).diagonal().unsqueeze(1)
    blocks = [(a, p, ga, gp, True), (a, a, ga, ga, False), (p, p, gp, gp, False),
              (a, n, ga, gn, False)]  # fmt: skip
    leaves, masks = [], []
    for first, second, guide_first, guide_second, paired in blocks:
        mask = cosine64(guide_first, guide_second) > guided_positive - 0.05  # absolute margin
        if paired:
            mask &= ~torch.eye(6, dtype=torch.bool)
        leaves.append(cosine64(first, second).requires_grad_())
        masks.append(mask)
    logits = torch.cat([leaf.masked_fill(mask, -math.inf) for leaf, mask in zip(leaves, masks,
                                                                                strict=True)], 1)
    F.cross_entropy(logits / 0.05, torch.arange(6)).backward()
    torch.testing.assert_close(capture.scores.to(torch.float64),
                               torch.cat([leaves[0], leaves[3]], 1).detach(), atol=1e-5, rtol=0)
    torch.testing.assert_close(capture.grad.to(torch.float64),
                               torch.cat([leaves[0].grad, leaves[3].grad], 1), atol=1e-5, rtol=0)
    assert torch.equal(capture.candidates, ~torch.cat([masks[0], masks[3]], 1))
    assert masks[0].any() and masks[3].any()  # the guide masked pairs in both blocks
    assert capture.positives[:, :6].equal(torch.eye(6, dtype=torch.bool))
    assert not capture.positives[:, 6:].any()


def trainer_run(tmp_path, watch: bool):
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer

    model = static_model()
    anchors, positives = caption_pairs(64)
    data = Dataset.from_dict({"anchor": anchors, "positive": positives})
    if watch:
        callback = GradlabTrainerCallback(preset="full")
        loss = losses.MultipleNegativesRankingLoss(model, similarity_fct=RecordingSimilarity())
        assert callback.watch(loss) is loss
    else:
        callback, loss = None, losses.MultipleNegativesRankingLoss(model)
    trainer = SentenceTransformerTrainer(model=model, args=sentence_training_arguments(tmp_path),
                                         train_dataset=data, loss=loss,
                                         callbacks=[callback] if callback else None)  # fmt: skip
    if callback is not None:
        callback.attach(trainer)
    trainer.train()
    return trainer


def test_sentence_transformer_trainer_logs_the_anatomy_and_trains_bit_identically(tmp_path):
    watched = trainer_run(tmp_path / "a", watch=True)
    plain = trainer_run(tmp_path / "b", watch=False)
    for (name, first), (_, second) in zip(watched.model.named_parameters(),
                                          plain.model.named_parameters(), strict=True):  # fmt: skip
        assert torch.equal(first, second), name
    _, records = read_jsonl(tmp_path / "a" / "gradlab_logs" / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2, 3, 4, 5]
    entries = [entry for entry in watched.state.log_history if "gradlab/loss" in entry]
    assert [entry["step"] for entry in entries] == [1, 2, 3, 4, 5]
    for record, entry in zip(records, entries, strict=True):
        logged = {key.removeprefix("gradlab/") for key in entry if key.startswith("gradlab/")}
        assert logged == set(record) - {"step"}
        assert entry["gradlab/loss"] == record["loss"]
    assert records[0]["anatomy_i2t_active_negatives_mean"] > 0
    plain_losses = [entry["loss"] for entry in plain.state.log_history if "loss" in entry]
    assert [record["loss"] for record in records] == pytest.approx(plain_losses, rel=1e-6)


@pytest.mark.slow
def test_a_trainer_without_the_callback_warns_at_the_users_train_call(tmp_path):
    # sentence-transformers calls the loss itself: the warning named its compute_loss line
    import inspect

    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer

    model = static_model()
    anchors, positives = caption_pairs(16)
    callback = GradlabTrainerCallback(preset="cheap")
    loss = callback.watch(
        losses.MultipleNegativesRankingLoss(model, similarity_fct=RecordingSimilarity())
    )
    trainer = SentenceTransformerTrainer(
        model=model, args=sentence_training_arguments(tmp_path, max_steps=2),
        train_dataset=Dataset.from_dict({"anchor": anchors, "positive": positives}), loss=loss,
    )  # fmt: skip  # callbacks=[...] and attach() both forgotten
    with pytest.warns(RuntimeWarning, match=r"call callback\.attach") as caught:
        line = inspect.currentframe().f_lineno + 1
        trainer.train()
    found = [w for w in caught if "attach" in str(w.message)]
    assert len(found) == 1
    assert (found[0].filename, found[0].lineno) == (__file__, line)


@pytest.mark.slow
@pytest.mark.parametrize("logging_steps", [10, 1])
def test_a_run_shorter_than_its_logging_steps_says_that_nothing_was_logged(tmp_path,
                                                                           logging_steps):
    # the Trainer's default logging_steps (500) left metrics.jsonl without a record, silently
    import inspect
    import warnings

    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer

    model = static_model()
    anchors, positives = caption_pairs(48)
    callback = GradlabTrainerCallback(preset="cheap")
    loss = callback.watch(
        losses.MultipleNegativesRankingLoss(model, similarity_fct=RecordingSimilarity())
    )
    args = sentence_training_arguments(tmp_path, max_steps=3, logging_steps=logging_steps)
    trainer = SentenceTransformerTrainer(
        model=model, args=args, loss=loss,
        train_dataset=Dataset.from_dict({"anchor": anchors, "positive": positives}),
    )  # fmt: skip
    callback.attach(trainer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        trainer.train()
    found = [w for w in caught if "logged none of" in str(w.message)]
    _, records = read_jsonl(tmp_path / "gradlab_logs" / "metrics.jsonl")
    if logging_steps == 1:
        assert found == [] and [record["step"] for record in records] == [1, 2, 3]
        return
    assert records == []
    assert len(found) == 1 and found[0].category is RuntimeWarning
    assert (found[0].filename, found[0].lineno) == (__file__, line)
    assert "logging_steps=10" in str(found[0].message)


def test_the_similarity_returns_the_wrapped_function_s_matrix_and_gradient():
    from sentence_transformers.util import cos_sim, dot_score

    first = torch.randn(5, 4, requires_grad=True)
    second = torch.randn(7, 4)
    for function in (cos_sim, dot_score):
        recording = RecordingSimilarity(function)
        recording.score_recorder = lambda direction, matrix, mask: None
        torch.testing.assert_close(recording(first, second), function(first, second),
                                   atol=0, rtol=0)  # fmt: skip
    assert RecordingSimilarity().__name__ == "cos_sim"


def test_bad_arguments_are_refused():
    with pytest.raises(GradlabError, match="similarity_fct must be a callable"):
        RecordingSimilarity(3)
    with pytest.raises(GradlabError, match="has none"):
        record_scores(torch.nn.Linear(2, 2))
    with pytest.raises(GradlabError, match="score_recorder"):
        RecordingSimilarity().score_recorder = 3
    model = static_model()
    loss = losses.MultipleNegativesRankingLoss(model, similarity_fct=RecordingSimilarity())
    adapter = sentence_transformers_adapter(loss, None)
    with pytest.raises(GradlabError, match="recorded no score matrix"):
        adapter.capture([], None, 0.01, recorded=[])
    assert sentence_transformers_adapter(losses.MultipleNegativesRankingLoss(model), None) is None


@pytest.mark.parametrize(
    "make",
    [
        lambda model: losses.MultipleNegativesRankingLoss(model),
        # a similarity without a __name__ (a partial, a callable object): no pair loss
        lambda model: losses.MultipleNegativesRankingLoss(model, similarity_fct=functools.partial(
            losses.MultipleNegativesRankingLoss(model).similarity_fct)),
        # (a wrapper around a recording loss is told to watch the inner loss:
        # test_sentence_transformers_matryoshka.py)
        lambda model: losses.MatryoshkaLoss(
            model, losses.MultipleNegativesRankingLoss(model), [16, 8]),
        # a wrapper around a loss with no similarity_fct at all (distance_metric instead)
        lambda model: losses.MatryoshkaLoss(model, losses.ContrastiveLoss(model), [16, 8]),
    ],
)
def test_a_loss_whose_score_matrix_is_not_recorded_is_refused_at_watch(tmp_path, make):
    """Called on tokenised features, such a loss gave a header-only log (each call skipped
    with a warning that pointed at pytorch-metric-learning's distances)."""
    model = static_model()
    loss = make(model)
    where = "gradlab.integrations.sentence_transformers"
    refusal = (
        f"loss_fn {type(loss).__name__} is a sentence-transformers loss whose score matrix the "
        "Monitor cannot read: it is called on tokenised features, and only the matrices its "
        "similarity_fct records are read. Make an in-batch loss that scores a [Q, C] matrix "
        "(MultipleNegativesRankingLoss, GISTEmbedLoss and their cached and symmetric forms) "
        f"with similarity_fct={where}.RecordingSimilarity(), or give it one around its own "
        f"with {where}.record_scores(loss); watch a wrapper such as MatryoshkaLoss through its "
        "inner loss")
    with pytest.raises(GradlabError) as refused:
        GradlabTrainerCallback().watch(loss)
    assert str(refused.value) == refusal
    with gradlab.Monitor(tmp_path / "run") as monitor, pytest.raises(GradlabError) as refused:
        monitor.watch(loss)
    assert str(refused.value) == refusal


@pytest.mark.parametrize("loss_class", ["CoSENTLoss", "AnglELoss"])
def test_a_pair_loss_given_a_recording_similarity_around_cos_sim_is_refused_when_watched(
    tmp_path, loss_class
):
    """RecordingSimilarity() wraps cos_sim, a [B, B] matrix; CoSENTLoss then failed inside
    training with "Labels and scores must have the same shape", though watch had accepted it."""
    model = static_model()
    loss = getattr(losses, loss_class)(model)
    loss.similarity_fct = RecordingSimilarity()  # CoSENTLoss(model, similarity_fct=...) alike
    refusal = (f"{loss_class} scores (sentence1, sentence2) pairs with a pairwise similarity (a "
               "[B] vector), but its similarity_fct is RecordingSimilarity() around cos_sim (its "
               "default), which makes a [B, B] matrix the loss cannot take: leave the loss's "
               "own similarity_fct: the Monitor reads no loss on scored pairs. To log a run, "
               "train with (or add) an in-batch loss such as MultipleNegativesRankingLoss(model, "
               "similarity_fct=gradlab.integrations.sentence_transformers.RecordingSimilarity()) "
               "and watch that")
    with gradlab.Monitor(tmp_path / "run") as monitor, pytest.raises(GradlabError) as refused:
        monitor.watch(loss)
    assert str(refused.value) == refusal
    with pytest.raises(GradlabError) as refused:
        GradlabTrainerCallback().watch(loss)
    assert str(refused.value) == refusal


def _watch_refusal(loss) -> str:
    """The message with which the callback's watch refuses ``loss``."""
    with pytest.raises(GradlabError) as refused:
        GradlabTrainerCallback().watch(loss)
    return str(refused.value)


@pytest.mark.parametrize(("loss_class", "scored"), [
    ("CoSENTLoss", "scored pairs (its similarity_fct, pairwise_cos_sim, gives one score per "
                   "pair)"),
    ("TripletLoss", "pairs or triplets (no similarity_fct scores them as a matrix)"),
    ("CosineSimilarityLoss", "pairs or triplets (no similarity_fct scores them as a matrix)"),
])  # fmt: skip
def test_a_loss_on_pairs_is_refused_saying_it_has_no_matrix_and_what_to_watch(loss_class,
                                                                                 scored):
    # CoSENTLoss was told to take a RecordingSimilarity, and given one, to leave its own:
    # advice in a circle. A loss on pairs has no [Q, C] matrix to read at all.
    assert _watch_refusal(getattr(losses, loss_class)(static_model())) == (
        f"loss_fn {loss_class} is a sentence-transformers loss on {scored}, not an in-batch "
        "loss on a [Q, C] matrix of candidates: the Monitor has no score matrix to read there. "
        "To log a run, train with (or add) an in-batch loss such as "
        "MultipleNegativesRankingLoss(model, similarity_fct=gradlab.integrations."
        "sentence_transformers.RecordingSimilarity()) and watch that")


@pytest.mark.parametrize("loss_class", ["CoSENTLoss", "AnglELoss"])
def test_a_pair_loss_given_its_own_similarity_recorded_is_refused_when_watched(loss_class):
    # record_scores around CoSENT's own pairwise similarity was accepted at watch; training
    # then warned at each logged call and logged nothing
    assert _watch_refusal(record_scores(getattr(losses, loss_class)(static_model()))) == (
        f"{loss_class} scores (sentence1, sentence2) pairs with a pairwise similarity (a [B] "
        "vector), not an in-batch [Q, C] matrix: the Monitor reads no loss on scored pairs. To "
        "log a run, train with (or add) an in-batch loss such as MultipleNegativesRankingLoss("
        "model, similarity_fct=gradlab.integrations.sentence_transformers.RecordingSimilarity()) "
        "and watch that")


def test_a_pairwise_similarity_is_named_not_read_as_a_matrix(tmp_path):
    """A loss on scored (sentence1, sentence2) pairs that watch does not know by name (CoSENT
    and AnglE are refused there): its recorded similarity is a [B] vector, which was read as a
    matrix and skipped with an IndexError's 'Dimension out of range'."""

    class PairLoss(losses.CoSENTLoss):  # a loss of one's own on pairs
        pass

    model = static_model()
    loss = record_scores(PairLoss(model))
    first, second = caption_pairs(6)
    with gradlab.Monitor(tmp_path / "run", every=1) as monitor:
        watched = monitor.watch(loss)
        refusal = re.escape(
            "PairLoss's similarity_fct returned a [6] tensor, not a [Q, C] score matrix: the "
            "Monitor reads losses that score every query against every candidate "
            "(MultipleNegativesRankingLoss, GISTEmbedLoss and their cached forms), not losses "
            "on scored pairs;")
        with pytest.warns(RuntimeWarning, match=refusal):
            watched(sentence_features(model, first, second), torch.linspace(0, 1, 6)).backward()
        monitor.step()
    assert monitor.skipped_calls == 1


def test_a_model_watched_in_place_of_its_loss_is_named_a_model(tmp_path):
    """callback.watch(model) said the model was 'a sentence-transformers loss whose score
    matrix the Monitor cannot read'."""
    model = static_model()
    expected = ("SentenceTransformer is a sentence-transformers model or module, not a loss: "
                "watch the loss you train it with, e.g. MultipleNegativesRankingLoss(model, "
                "similarity_fct=gradlab.integrations.sentence_transformers.RecordingSimilarity())")
    with pytest.raises(GradlabError) as refused:
        GradlabTrainerCallback().watch(model)
    assert str(refused.value) == f"loss_fn {expected}"
    with gradlab.Monitor(tmp_path / "run") as monitor, pytest.raises(GradlabError) as refused:
        monitor.watch(model[0])
    assert str(refused.value).startswith("loss_fn StaticEmbedding is a sentence-transformers "
                                         "model or module, not a loss")  # fmt: skip


def test_record_scores_of_a_loss_class_asks_for_an_instance():
    # the class itself was refused as "type has none"
    with pytest.raises(GradlabError) as refused:
        record_scores(losses.GISTEmbedLoss)
    assert str(refused.value) == (
        "loss must be a sentence-transformers loss made already (an instance); got the class "
        "GISTEmbedLoss: record_scores(GISTEmbedLoss(model, ...))")


@pytest.mark.parametrize("loss_class", ["GISTEmbedLoss", "CachedGISTEmbedLoss"])
def test_gist_given_a_recording_similarity_around_cos_sim_is_refused_when_watched(
    tmp_path, loss_class
):
    """GIST scores broadcast [B, 1, d] x [1, C, d] tensors; RecordingSimilarity() around
    cos_sim failed inside training ("self must be a matrix"), though watch had accepted it."""
    model = bert_sentence_model(tmp_path / "model", seed=0)
    loss = getattr(losses, loss_class)(model, bert_sentence_model(tmp_path / "guide", seed=1))
    loss.similarity_fct = RecordingSimilarity()
    refusal = (f"{loss_class} scores broadcast [B, 1, d] x [1, C, d] embeddings with its own "
               "similarity_fct (torch.nn.CosineSimilarity(dim=-1)), and its similarity_fct is "
               "RecordingSimilarity() around cos_sim, which takes [B, d] x [C, d]: make the "
               "loss with its own similarity_fct and wrap it with "
               "gradlab.integrations.sentence_transformers.record_scores(loss)")
    assert watch_refusals(loss, tmp_path / "run") == (refusal, refusal)


def test_the_recording_similarity_class_instead_of_one_is_refused_when_watched(tmp_path):
    """similarity_fct=RecordingSimilarity (no parentheses) was accepted at watch; training
    then failed inside sentence-transformers with RecordingSimilarity.__init__'s TypeError."""
    loss = losses.MultipleNegativesRankingLoss(static_model(), similarity_fct=RecordingSimilarity)
    refusal = ("loss_fn MultipleNegativesRankingLoss's similarity_fct is the class "
               "RecordingSimilarity, not a similarity: make the loss with "
               "similarity_fct=RecordingSimilarity() (an instance)")
    assert watch_refusals(loss, tmp_path / "run") == (refusal, refusal)
