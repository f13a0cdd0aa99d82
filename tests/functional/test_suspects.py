"""False-negative suspects and their summary against float64 loops."""

from __future__ import annotations

import hashlib
import math

import pytest
import torch

from gradlab.errors import GradlabError
from gradlab.functional.suspects import content_hashes, false_negative_suspects, suspect_summary
from tests.reference.tie_aware_loops import expected_over_ties


def _loop_suspects(scores, positives, candidates, labels, hashes, margin):
    rows, columns = len(scores), len(scores[0])
    flagged = [[False] * columns for _ in range(rows)]
    for i in range(rows):
        pos = [scores[i][j] for j in range(columns) if positives[i][j] and candidates[i][j]]
        for j in range(columns):
            if positives[i][j] or not candidates[i][j]:
                continue
            hit = labels is not None and labels[i] == labels[j]
            hit = hit or (hashes is not None and hashes[i] == hashes[j])
            if margin is not None and pos:
                low = min(pos)
                hit = hit or scores[i][j] >= low - abs(low) * margin
            flagged[i][j] = hit
    return flagged


def _batch(seed, size=9):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.rand(size, size, generator=generator, dtype=torch.float64) * 2 - 1
    positives = torch.eye(size, dtype=torch.bool)
    candidates = torch.rand(size, size, generator=generator) < 0.9
    candidates.fill_diagonal_(True)
    labels = torch.randint(0, 4, (size,), generator=generator)
    return scores, positives, candidates, labels


@pytest.mark.parametrize(
    ("margin", "use_labels"), [(None, True), (0.0, False), (0.1, True), (0.5, False)]
)
def test_suspects_match_a_loop(margin, use_labels):
    scores, positives, candidates, labels = _batch(1)
    scores[3, 3] = -0.4  # a negative positive score: the sign-safe rule matters
    hashes = torch.tensor([5, 6, 5, 7, 8, 9, 6, 1, 2])
    got = false_negative_suspects(scores, positives, candidate_mask=candidates,
                                  labels=labels if use_labels else None, hashes=hashes,
                                  margin=margin)  # fmt: skip
    expected = _loop_suspects(scores.tolist(), positives.tolist(), candidates.tolist(),
                              labels.tolist() if use_labels else None, hashes.tolist(),
                              margin)  # fmt: skip
    assert got.tolist() == expected


def test_the_rule_is_sign_safe():
    # positive score -0.5, margin 0.2: threshold -0.6 (the unsafe pos * (1 - m) gives -0.4)
    scores = torch.tensor([[-0.5, -0.55, -0.45, -0.65]])
    eye = torch.tensor([[True, False, False, False]])
    assert false_negative_suspects(scores, eye, margin=0.2).tolist() == [[False, True, True, False]]
    # margin 0: a negative tied with the positive is a suspect (>=)
    tied = torch.tensor([[0.5, 0.5, 0.4]])
    eye = torch.tensor([[True, False, False]])
    assert false_negative_suspects(tied, eye, margin=0.0).tolist() == [[False, True, False]]


def test_pairs_of_labels_for_a_rectangular_matrix():
    scores = torch.zeros(2, 3)
    positives = torch.tensor([[True, False, False], [False, True, False]])
    got = false_negative_suspects(scores, positives, labels=(torch.tensor([1, 2]),
                                                             torch.tensor([1, 1, 2])))  # fmt: skip
    assert got.tolist() == [[False, True, False], [False, False, True]]


def test_summary_matches_a_loop():
    scores, positives, candidates, labels = _batch(2, size=12)
    suspects = false_negative_suspects(scores, positives, candidate_mask=candidates,
                                       labels=labels, margin=0.3)
    grad = torch.randn(12, 12, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    k = 3
    summary = suspect_summary(suspects, scores, positives, candidate_mask=candidates,
                              score_grad=grad, k=k)
    count, mass, suspect_mass, shares = 0, 0.0, 0.0, []
    for i in range(12):
        negatives = [j for j in range(12) if candidates[i, j] and not positives[i, j]]
        count += sum(bool(suspects[i, j]) for j in negatives)
        mass += sum(abs(float(grad[i, j])) for j in negatives)
        suspect_mass += sum(abs(float(grad[i, j])) for j in negatives if suspects[i, j])
        hardest = sorted(negatives, key=lambda j: -float(scores[i, j]))[:k]
        if hardest:
            shares.append(sum(bool(suspects[i, j]) for j in hardest) / len(hardest))
    assert float(summary.count) == count
    assert float(summary.per_query) == pytest.approx(count / 12)
    assert float(summary.gradient_share) == pytest.approx(suspect_mass / mass, rel=1e-12)
    assert float(summary.top_k_share) == pytest.approx(sum(shares) / len(shares), rel=1e-12)
    without = suspect_summary(suspects, scores, positives, candidate_mask=candidates, k=k)
    assert math.isnan(float(without.gradient_share))


def test_content_hashes_are_stable():
    # BLAKE2b-64 of "abc" (hashlib), read little endian and signed: the same in every process
    digest = hashlib.blake2b(b"abc", digest_size=8).digest()
    expected = int.from_bytes(digest, "little", signed=True)
    assert content_hashes(["abc", b"abc"]).tolist() == [expected, expected]
    hashes = content_hashes(["x", "y", "x"]).tolist()
    assert hashes[0] == hashes[2] != hashes[1]


@pytest.mark.parametrize(("call", "match"), [
    (lambda: false_negative_suspects(torch.zeros(2, 2), torch.eye(2, dtype=torch.bool)),
     "give at least one of labels, hashes or margin"),
    (lambda: false_negative_suspects(torch.zeros(2, 2), torch.eye(2, dtype=torch.bool),
                                     margin=-0.1), "margin must be a finite number"),
    (lambda: false_negative_suspects(torch.zeros(2, 2), torch.eye(2, dtype=torch.bool),
                                     labels=torch.zeros(3, dtype=torch.long)),
     r"labels must have shape \(2,\)"),
    (lambda: suspect_summary(torch.zeros(2, 2, dtype=torch.bool), torch.zeros(2, 2),
                             torch.eye(2, dtype=torch.bool), k=0), "k must be a positive"),
    (lambda: content_hashes(["a", 3]), "items must be str or bytes; got int at position 1"),
])  # fmt: skip
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(GradlabError, match=match):
        call()


_TWO = torch.eye(2, dtype=torch.bool)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: false_negative_suspects(torch.zeros(2, 2, dtype=torch.long), _TWO, margin=0.0),
     "scores must have a floating dtype; got torch.int64; pass scores.float()"),
    (lambda: false_negative_suspects(torch.zeros(2), _TWO, margin=0.0),
     "scores must be 2-D; got shape (2,)"),
    (lambda: false_negative_suspects(torch.zeros(2, 2), torch.eye(2), margin=0.0),
     "positives must be a bool tensor; got torch.float32 (a 0/1 mask: pass positives.bool())"),
    (lambda: false_negative_suspects(torch.zeros(2, 2), torch.eye(3, dtype=torch.bool),
                                     margin=0.0),
     "positives must have shape (2, 2) (one flag per score); got (3, 3)"),
    (lambda: false_negative_suspects(torch.zeros(2, 2, device="meta"), _TWO, margin=0.0),
     "tensors must be on one device; got scores on meta, positives on cpu"),
    (lambda: false_negative_suspects(torch.zeros(2, 2), _TWO.to("meta"), margin=0.0),
     "tensors must be on one device; got scores on cpu, positives on meta"),
    (lambda: false_negative_suspects(torch.zeros(2, 2), _TWO),
     "give at least one of labels, hashes or margin (the rules that flag a suspect); got none"),
    (lambda: false_negative_suspects(torch.zeros(2, 2), _TWO, candidate_mask=torch.ones(2, 2),
                                     margin=0.0),
     "candidate_mask must be a bool tensor; got torch.float32"
     " (a 0/1 mask: pass candidate_mask.bool())"),
    (lambda: false_negative_suspects(torch.zeros(2, 2), _TWO,
                                     candidate_mask=torch.ones(3, 3, dtype=torch.bool),
                                     margin=0.0),
     "candidate_mask must have shape (2, 2) (one flag per score); got (3, 3)"),
    (lambda: false_negative_suspects(torch.zeros(2, 2), _TWO, hashes=torch.zeros(3)),
     "hashes must have shape (2,) (one per query); got (3,)"),
    (lambda: false_negative_suspects(torch.zeros(2, 2), _TWO,
                                     labels=torch.zeros(2, 2, dtype=torch.long)),
     "labels must be 1-D; got shape (2, 2)"),
    (lambda: false_negative_suspects(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.bool),
                                     labels=(torch.zeros(2, dtype=torch.long),
                                             torch.zeros(2, dtype=torch.long))),
     "labels must have shape (3,) (one per candidate); got (2,)"),
    (lambda: false_negative_suspects(torch.zeros(2, 2), _TWO, labels=torch.tensor([0.0, 1.0])),
     "labels must have an integer dtype; got torch.float32 (whole-number ids: pass labels.long())"),
    # a tuple of three or one: "too many values to unpack", a ValueError
    (lambda: false_negative_suspects(torch.zeros(2, 2), _TWO,
                                     labels=(torch.zeros(2, dtype=torch.long),) * 3),
     "labels must be a tensor [B] or a pair (queries' [Q], candidates' [C]); got a tuple of 3"),
    (lambda: false_negative_suspects(torch.zeros(2, 2), _TWO, hashes=(torch.zeros(2),)),
     "hashes must be a tensor [B] or a pair (queries' [Q], candidates' [C]); got a tuple of 1"),
    (lambda: false_negative_suspects(torch.zeros(2, 2), _TWO, margin=2e6),
     "margin must be a finite number in [0, 1e+06]; got 2000000.0"),
    (lambda: false_negative_suspects(torch.zeros(2, 2), _TWO, margin=1e6 + 0.5),
     "margin must be a finite number in [0, 1e+06]; got 1000000.5"),
    (lambda: suspect_summary(torch.zeros(2, 2), torch.zeros(2, 2), _TWO),
     "suspects must be a bool tensor; got torch.float32 (a 0/1 mask: pass suspects.bool())"),
    (lambda: suspect_summary(torch.zeros(2, 2, dtype=torch.bool),
                             torch.zeros(2, 2, dtype=torch.long), _TWO),
     "scores must have a floating dtype; got torch.int64; pass scores.float()"),
    (lambda: suspect_summary(torch.zeros(2, 2, dtype=torch.bool), torch.zeros(2, 2),
                             torch.eye(3, dtype=torch.bool)),
     "positives must have shape (2, 2) (one flag per score); got (3, 3)"),
    (lambda: suspect_summary(torch.zeros(2, 2, dtype=torch.bool), torch.zeros(3, 3), _TWO),
     "scores must have shape (2, 2) (one score per flag); got (3, 3)"),
    (lambda: suspect_summary(torch.zeros(2, 2, dtype=torch.bool), torch.zeros(2, 2), _TWO,
                             score_grad=torch.zeros(3, 3)),
     "score_grad must have shape (2, 2) (dL/dS of the scores); got (3, 3)"),
])  # fmt: skip
def test_bad_input_messages_word_for_word(call, message):
    with pytest.raises(GradlabError) as caught:
        call()
    assert str(caught.value) == message


def test_hashes_and_labels_of_any_integer_dtype_and_utf8():
    scores = torch.zeros(3, 3)
    eye = torch.eye(3, dtype=torch.bool)
    for values in (torch.tensor([1, 2, 1], dtype=torch.int8), torch.tensor([True, False, True])):
        got = false_negative_suspects(scores, eye, hashes=values)
        assert got.tolist() == [[False, False, True], [False, False, False],
                                [True, False, False]]  # fmt: skip
    hashes = content_hashes(["é", "é".encode()])  # one text as str and as its UTF-8 bytes
    assert hashes.dtype == torch.int64 and hashes[0] == hashes[1]
    assert content_hashes([]).dtype == torch.int64


def _loop_summary(suspects, scores, positives, candidates, grad, k):
    rows, columns = len(scores), len(scores[0])
    count, mass, suspect_mass, shares = 0, 0.0, 0.0, []
    for i in range(rows):
        negatives = [j for j in range(columns) if candidates[i][j] and not positives[i][j]]
        count += sum(suspects[i][j] for j in negatives)
        mass += sum(abs(grad[i][j]) for j in negatives)
        suspect_mass += sum(abs(grad[i][j]) for j in negatives if suspects[i][j])
        hardest = sorted(negatives, key=lambda j: -scores[i][j])[:k]
        if hardest:
            shares.append(sum(suspects[i][j] for j in hardest) / len(hardest))
    return count, count / rows, suspect_mass / mass, sum(shares) / len(shares)


@pytest.mark.parametrize("k", [None, 1, 3])
def test_summary_of_a_rectangular_float32_batch_matches_a_loop(k):
    """4 queries x 13 candidates in float32: a query without negatives, one with a single
    negative, and queries with more than the default k = 10; values in float64."""
    generator = torch.Generator().manual_seed(6)
    scores = torch.rand(4, 13, generator=generator)
    grad = torch.randn(4, 13, generator=generator) * 1e-3
    positives = torch.zeros(4, 13, dtype=torch.bool)
    positives[:, 0] = True
    candidates = torch.ones(4, 13, dtype=torch.bool)
    candidates[1, 1:] = False  # query 1: no negative
    candidates[2, 2:] = False  # query 2: one negative
    suspects = torch.rand(4, 13, generator=generator) < 0.4
    suspects[2, 1] = True  # query 2's one negative is a suspect: its share is 1
    options = {} if k is None else {"k": k}
    got = suspect_summary(suspects, scores, positives, candidate_mask=candidates,
                          score_grad=grad, **options)
    expected = _loop_summary(suspects.tolist(), scores.tolist(), positives.tolist(),
                             candidates.tolist(), grad.tolist(), k or 10)  # fmt: skip
    assert all(value.dtype == torch.float64 for value in got)
    assert [float(value) for value in got] == pytest.approx(list(expected), rel=1e-12)


def test_summary_of_one_query_without_a_gradient():
    scores = torch.tensor([[0.9, 0.8, 0.1]])
    positives = torch.tensor([[True, False, False]])
    suspects = torch.tensor([[False, True, True]])
    summary = suspect_summary(suspects, scores, positives, k=1)
    assert [float(summary.count), float(summary.per_query), float(summary.top_k_share)] == [
        2.0, 2.0, 1.0]  # fmt: skip
    assert summary.gradient_share.dtype == torch.float64 and math.isnan(summary.gradient_share)


def test_a_batch_without_candidates_has_no_suspects():
    # C = 0: no negative can be a suspect, whatever the rule.
    scores, positives = torch.zeros(3, 0), torch.zeros(3, 0, dtype=torch.bool)
    labels = (torch.arange(3), torch.zeros(0, dtype=torch.long))
    got = false_negative_suspects(scores, positives, labels=labels, margin=0.0)
    assert got.shape == (3, 0) and got.dtype == torch.bool


@pytest.mark.parametrize(("call", "message"), [
    (lambda: suspect_summary(_TWO, torch.zeros(2, 2), torch.eye(2)),
     "positives must be a bool tensor; got torch.float32 (a 0/1 mask: pass positives.bool())"),
    (lambda: suspect_summary(_TWO, torch.zeros(2, 2), [[True, False], [False, True]]),
     "positives must be a torch.Tensor; got list; pass torch.as_tensor(positives)"),
    (lambda: suspect_summary(_TWO, torch.zeros(2, 2), _TWO, candidate_mask=torch.ones(2, 2)),
     "candidate_mask must be a bool tensor; got torch.float32"
     " (a 0/1 mask: pass candidate_mask.bool())"),
    (lambda: suspect_summary(_TWO, torch.zeros(2, 2), _TWO,
                             candidate_mask=torch.ones(3, 3, dtype=torch.bool)),
     "candidate_mask must have shape (2, 2) (one flag per score); got (3, 3)"),
    (lambda: suspect_summary(_TWO, torch.zeros(2, 2), _TWO, score_grad=_TWO),
     "score_grad must have a floating dtype; got torch.bool; pass score_grad.float()"),
    (lambda: suspect_summary(_TWO, torch.zeros(2, 2), _TWO.to("meta")),
     "tensors must be on one device; got suspects on cpu, scores on cpu, positives on meta"),
])  # fmt: skip
def test_the_summary_s_masks_and_gradient_are_checked_by_name(call, message):
    """These raised torch's TypeError (``~`` of a float tensor), an AttributeError (a list)
    or a RuntimeError of mismatched shapes deep inside the summary."""
    with pytest.raises(GradlabError) as caught:
        call()
    assert str(caught.value) == message


def _expected_top_k_share(suspects, scores, negatives, k):
    """Mean over queries with a negative of the suspects' share of the k hardest, averaged
    over every order of the tied negatives (brute force over permutations)."""
    shares = []
    for flags, row, keep in zip(suspects, scores, negatives, strict=True):
        columns = [c for c in range(len(row)) if keep[c]]
        if not columns:
            continue
        values = [row[c] for c in columns]
        hard = [flags[c] for c in columns]
        taken = min(k, len(columns))
        share = expected_over_ties(
            lambda order, hard, taken=taken: sum(hard[i] for i in order[:taken]), values, hard
        ) / taken
        shares.append(share)
    return sum(shares) / len(shares)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_top_k_share_of_tied_scores_is_the_expectation_over_their_orders(k, seed):
    """Scores on three levels (many ties at the k-th place): the share is the mean over
    every order of the ties, whichever column holds the suspect. topk had picked some of the
    tied negatives (0 or 1 for one suspect among four tied at k = 1, by its column)."""
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 3, (4, 6), generator=generator).to(torch.float64) / 2
    positives = torch.rand(4, 6, generator=generator) < 0.2
    suspects = torch.rand(4, 6, generator=generator) < 0.4
    summary = suspect_summary(suspects, scores, positives, k=k)
    expected = _expected_top_k_share((suspects & ~positives).tolist(), scores.tolist(),
                                     (~positives).tolist(), k)  # fmt: skip
    assert float(summary.top_k_share) == pytest.approx(expected, abs=1e-12)
    for column in range(1, 5):  # one suspect among five tied negatives, wherever it is
        flags = torch.zeros(1, 6, dtype=torch.bool)
        flags[0, column] = True
        one = suspect_summary(flags, torch.zeros(1, 6), torch.eye(1, 6, dtype=torch.bool), k=1)
        assert float(one.top_k_share) == pytest.approx(1 / 5)


def test_the_summary_of_a_batch_without_candidates_is_zero_suspects_and_no_share():
    # C = 0: no suspect (count 0), and no query has a negative, so neither share is defined.
    none = torch.zeros(3, 0, dtype=torch.bool)
    summary = suspect_summary(none, torch.zeros(3, 0), none)
    assert [float(summary.count), float(summary.per_query)] == [0.0, 0.0]
    for share in (summary.gradient_share, summary.top_k_share):
        assert share.dtype == torch.float64 and share.shape == () and math.isnan(share)


@pytest.mark.parametrize("k", [1, 3])
def test_the_top_k_share_of_one_candidate_column(k):
    # C = 1: each query's one candidate is its only negative (or none): the share is the mean
    # over the queries with a negative of whether it is a suspect (brute-force reference).
    suspects = torch.tensor([[True], [False], [True]])
    scores = torch.tensor([[0.5], [0.2], [0.9]])
    positives = torch.tensor([[False], [False], [True]])
    summary = suspect_summary(suspects, scores, positives, k=k)
    expected = _expected_top_k_share((suspects & ~positives).tolist(), scores.tolist(),
                                     (~positives).tolist(), k)  # fmt: skip
    assert expected == 0.5 and float(summary.top_k_share) == expected


@pytest.mark.parametrize(("extra", "message"), [
    ({"candidate_mask": torch.eye(2, dtype=torch.bool, device="meta")},
     "tensors must be on one device; got scores on cpu, candidate_mask on meta"),
    ({"score_grad": torch.zeros(2, 2, device="meta")},
     "tensors must be on one device; got scores on cpu, score_grad on meta"),
])  # fmt: skip
def test_the_optional_tensors_must_be_on_the_scores_device(extra, message):
    eye = torch.eye(2, dtype=torch.bool)
    with pytest.raises(GradlabError) as caught:
        suspect_summary(eye, torch.zeros(2, 2), eye, **extra)
    assert str(caught.value) == message


@pytest.mark.parametrize(("items", "message"), [
    (None, "items must be an iterable of str or bytes, one per item; got NoneType"),
    (5, "items must be an iterable of str or bytes, one per item; got int"),
    ("abc", "items must be an iterable of str or bytes, one per item; got a single str, whose "
            "characters would be hashed one by one (pass [text] for one item)"),
    (b"ab", "items must be an iterable of str or bytes, one per item; got a single bytes, whose "
            "characters would be hashed one by one (pass [text] for one item)"),
])  # fmt: skip
def test_content_hashes_refuse_what_is_not_a_list_of_items(items, message):
    # a bare string gave one hash per character; None a TypeError
    with pytest.raises(GradlabError) as raised:
        content_hashes(items)
    assert str(raised.value) == message


def test_masks_and_labels_on_another_device_than_the_scores_are_refused_by_name():
    scores, positives = torch.zeros(3, 5), torch.zeros(3, 5, dtype=torch.bool)
    meta = torch.ones(3, 5, dtype=torch.bool, device="meta")
    cases = [
        ({"margin": 0.1, "candidate_mask": meta},
         "tensors must be on one device; got scores on cpu, candidate_mask on meta"),
        ({"labels": (torch.arange(3, device="meta"), torch.arange(5))},
         "tensors must be on one device; got labels of the queries on meta, labels of the "
         "candidates on cpu"),
        ({"hashes": (torch.arange(3, device="meta"), torch.arange(5, device="meta"))},
         "hashes is a meta tensor (a shape without values); pass a tensor on a real device "
         "(cpu, cuda, ...)"),
    ]
    for options, message in cases:
        with pytest.raises(GradlabError) as raised:
            false_negative_suspects(scores, positives, **options)
        assert str(raised.value) == message
    # meta scores with meta labels: shapes alone, as torch computes on meta
    flagged = false_negative_suspects(scores.to("meta"), positives.to("meta"),
                                      labels=(torch.arange(3, device="meta"),
                                              torch.arange(5, device="meta")))  # fmt: skip
    assert flagged.is_meta and flagged.shape == (3, 5)


def test_labels_on_another_device_than_the_scores_are_moved_to_the_scores():
    # the collisions of CPU labels are moved to the scores' device (here meta: shapes alone)
    flagged = false_negative_suspects(torch.zeros(3, 5, device="meta"),
                                      torch.zeros(3, 5, dtype=torch.bool, device="meta"),
                                      labels=(torch.arange(3), torch.arange(5)))  # fmt: skip
    assert flagged.is_meta and flagged.shape == (3, 5)


def test_a_nan_score_among_a_query_s_negatives_makes_its_top_k_share_undefined():
    # the suspect's own score NaN: its hardest negatives have no order; the share read 0.0
    scores = torch.tensor([[0.9, math.nan, 0.5, 0.1], [0.9, 0.8, 0.5, 0.1]])
    positives = torch.tensor([[True, False, False, False]] * 2)
    suspects = torch.tensor([[False, True, False, False]] * 2)
    grad = torch.tensor([[-1.0, 0.6, 0.2, 0.2]] * 2)
    summary = suspect_summary(suspects, scores, positives, score_grad=grad, k=2)
    assert math.isnan(summary.top_k_share)
    assert summary.gradient_share == pytest.approx(0.6)  # read from dL/dS alone
    kept = suspect_summary(suspects[1:], scores[1:], positives[1:], score_grad=grad[1:], k=2)
    assert kept.top_k_share == pytest.approx(0.5)  # the finite row alone: 1 of its 2 hardest
    # a NaN on a positive or outside the candidates orders no negative
    positive_nan = scores[1:].clone()
    positive_nan[0, 0] = math.nan
    assert suspect_summary(suspects[1:], positive_nan, positives[1:], k=2).top_k_share == 0.5
    grad_nan = grad.clone()
    grad_nan[0, 2] = math.nan
    assert math.isnan(suspect_summary(suspects, scores, positives, score_grad=grad_nan,
                                      k=2).gradient_share)  # fmt: skip
