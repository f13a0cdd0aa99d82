"""What an equivalence check tells its reader: the table of ``str(result)``, ``to_dict()``,
``result["name"]`` and each quantity's ``where()``.

The results are built by hand (their fields are public) or by :func:`compare` on hand-made
:class:`Gradients` with differences planted where the test wants them, so that every expected
line, row, column, memory slot and process follows from the inputs and the documented meaning
(a quantity differs beyond ``atol + rtol * max|reference|``; the columns after the batch's are
memory slots; the processes hold equal contiguous shards of the rows).
"""

import math

import pytest
import torch

import gradlab
from gradlab.equivalence import (
    EquivalenceResult,
    FullBatch,
    Gradients,
    PairedBatch,
    QuantityComparison,
    compare,
    compare_gradients,
    synthetic_problem,
)
from gradlab.errors import GradlabError

# --- the table -------------------------------------------------------------------------------


def _differing_result() -> EquivalenceResult:
    """One process, a loss name, two quantities that differ, one skipped, one without scale."""
    return EquivalenceResult(
        reference="FullBatch()", candidate="Accumulation(micro_batches=2)", loss="NTXentLoss",
        dtype="float64", world_size=1, atol=1e-10, rtol=1e-10, reference_loss=1.25,
        candidate_loss=0.875,
        quantities=[
            QuantityComparison("dL/dtheta", max_abs=0.5, reference_max=2.0, relative=0.25,
                               agrees=False, scale=0.75, scaled_agrees=False,
                               parameters=["0.weight", "0.bias"]),
            QuantityComparison("dL/dqueries", recorded=False),
            QuantityComparison("dL/dcandidates", max_abs=0.0, reference_max=1.0, relative=0.0,
                               scale=1.0),
            QuantityComparison("dL/dscores", max_abs=0.25, reference_max=0.5, relative=0.5,
                               agrees=False, scale=0.5, scaled_agrees=True, rows=[0, 1, 2, 5],
                               columns=[3], unscored=8,
                               negatives_with_gradient={"reference": 6.0, "candidate": 2.5}),
            QuantityComparison("scores", max_abs=0.0, reference_max=0.0, relative=0.0,
                               scale=math.nan),
        ],
    )  # fmt: skip


def test_the_table_of_a_differing_result_line_by_line():
    assert str(_differing_result()).split("\n") == [
        "candidate Accumulation(micro_batches=2) against reference FullBatch(), NTXentLoss; "
        "float64, 1 process",
        "loss: reference 1.25, candidate 0.875",
        "tolerance per quantity: max|diff| <= 1e-10 + 1e-10 x max|reference|",
        "",
        "quantity          max|diff|   relative    scale  verdict  where",
        "dL/dtheta          5.00e-01   2.50e-01     0.75  DIFFERS  parameters 0.weight, 0.bias",
        "dL/dqueries               -          -        -  skipped  not recorded by both steps",
        "dL/dcandidates     0.00e+00   0.00e+00        1  agrees",
        "dL/dscores         2.50e-01   5.00e-01      0.5  DIFFERS  = 0.5 x reference; "
        "rows 0-2, 5; columns 3; 8 scores never computed; "
        "negatives with gradient per query 2.5 (reference 6.0)",
        "scores             0.00e+00   0.00e+00        -  agrees",
        "",
        "verdict: NOT EQUIVALENT (dL/dtheta, dL/dscores differ; the candidate never computed 8 "
        "of the reference's scores: its queries were ranked against part of the candidates "
        "only (scores within each process or chunk, none gathered); the losses differ too "
        "(reference 1.25, candidate 0.875, relative difference 3.0e-01): the candidate "
        "computes another objective)",
    ]


def test_the_verdict_names_scores_never_computed_only_where_the_scores_gradient_differs():
    # gradient caching in two processes ranked each query within its own process: the verdict
    # said NOT EQUIVALENT with no word of why
    result = _differing_result()
    for scores_agree, unscored in ((True, 8), (False, 0)):
        scores = result["dL/dscores"]
        scores.agrees, scores.unscored = scores_agree, unscored
        assert "never computed" not in str(result).split("\n")[-1]
    scores.unscored = 3
    assert "the candidate never computed 3 of the reference's scores" in str(result)


def test_a_negative_scale_of_nine_characters_keeps_a_space_before_it():
    # was "1.27e+00-0.004449": the relative and the scale columns ran together
    row = QuantityComparison("dL/dqueries", max_abs=1.61, reference_max=1.27, relative=1.27,
                             agrees=False, scaled_agrees=False, scale=-0.004449)  # fmt: skip
    result = EquivalenceResult(
        reference="mine", candidate="theirs", loss="", dtype="float64", world_size=1,
        atol=1e-10, rtol=1e-10, reference_loss=1.0, candidate_loss=1.0, quantities=[row],
    )  # fmt: skip
    assert str(result).split("\n")[5] == (
        "dL/dqueries        1.61e+00   1.27e+00 -0.004449  DIFFERS"
    )


def test_the_table_of_an_equivalent_result_in_two_processes_without_a_loss_name():
    gradients = ("dL/dtheta", "dL/dqueries", "dL/dcandidates", "dL/dscores")
    agreeing = [QuantityComparison(name, max_abs=0.0, reference_max=1.0, scale=1.0)
                for name in gradients]  # fmt: skip
    result = EquivalenceResult(
        reference="mine", candidate="theirs", loss="", dtype="float32", world_size=2,
        atol=1e-05, rtol=0.0001, reference_loss=0.5, candidate_loss=0.5,
        quantities=[*agreeing, QuantityComparison("scores", recorded=False)],
    )  # fmt: skip
    assert str(result).split("\n") == [
        "candidate theirs against reference mine; float32, 2 processes",
        "loss: reference 0.5, candidate 0.5",
        "tolerance per quantity: max|diff| <= 1e-05 + 0.0001 x max|reference|",
        "",
        "quantity          max|diff|   relative    scale  verdict  where",
        "dL/dtheta          0.00e+00   0.00e+00        1  agrees",
        "dL/dqueries        0.00e+00   0.00e+00        1  agrees",
        "dL/dcandidates     0.00e+00   0.00e+00        1  agrees",
        "dL/dscores         0.00e+00   0.00e+00        1  agrees",
        "scores                    -          -        -  skipped  not recorded by both steps",
        "",
        "verdict: EQUIVALENT",
    ]


def test_the_table_names_the_steps_by_their_name_or_else_their_function_or_class():
    loss = gradlab.NTXentLoss(temperature=0.5)

    def whole_batch(model, batch, probe):
        return FullBatch(loss)(model, batch, probe)

    class Unnamed:  # an instance: neither a ``name`` nor a ``__name__``
        def __call__(self, model, batch, probe):
            return FullBatch(loss)(model, batch, probe)

    model, batch = synthetic_problem(batch_size=4)
    result = compare_gradients(whole_batch, Unnamed(), model, batch)
    assert (result.reference, result.candidate) == ("whole_batch", "Unnamed")
    assert str(result).split("\n")[0] == (
        "candidate Unnamed against reference whole_batch; float64, 1 process"
    )
    named = compare_gradients(FullBatch(loss), whole_batch, model, batch)
    assert (named.reference, named.candidate) == ("FullBatch()", "whole_batch")


# --- the dict and the lookup -----------------------------------------------------------------


def test_to_dict_holds_every_field_with_nan_and_inf_as_strings():
    result = EquivalenceResult(
        reference="ref", candidate="cand", loss="SmoothAPLoss", dtype="float64", world_size=2,
        atol=0.5, rtol=0.25, reference_loss=1.5, candidate_loss=2.0,
        quantities=[
            QuantityComparison("dL/dtheta", max_abs=3.0, reference_max=0.0, relative=math.inf,
                               threshold=0.5, agrees=False, scale=math.nan,
                               scaled_agrees=False, parameters=["w"],
                               worst={"index": [1], "reference": 0.0, "candidate": 3.0,
                                      "parameter": "w"}),
            QuantityComparison("dL/dqueries", max_abs=1.0, reference_max=4.0, relative=0.25,
                               threshold=1.5, scale=1.0, rows=[2, 3], ranks=[1]),
        ],
    )  # fmt: skip
    empty = {"rows": [], "columns": [], "memory_slots": [], "ranks": [], "unscored": 0,
             "negatives_with_gradient": {}, "no_gradient": False}  # fmt: skip
    assert result.to_dict() == {
        "reference": "ref",
        "candidate": "cand",
        "loss": "SmoothAPLoss",
        "dtype": "float64",
        "world_size": 2,
        "tolerance": {"atol": 0.5, "rtol": 0.25},
        "reference_loss": 1.5,
        "candidate_loss": 2.0,
        "equivalent": False,
        "differing": ["dL/dtheta"],
        "class_size": None,
        "cause": None,
        "unsplit": None,
        "quantities": {
            "dL/dtheta": {
                **empty, "name": "dL/dtheta", "recorded": True, "max_abs": 3.0,
                "reference_max": 0.0, "relative": "inf", "threshold": 0.5, "agrees": False,
                "scale": "nan", "scaled_agrees": False, "parameters": ["w"],
                "worst": {"index": [1], "reference": 0.0, "candidate": 3.0, "parameter": "w"},
            },
            "dL/dqueries": {
                **empty, "name": "dL/dqueries", "recorded": True, "max_abs": 1.0,
                "reference_max": 4.0, "relative": 0.25, "threshold": 1.5, "agrees": True,
                "scale": 1.0, "scaled_agrees": True, "parameters": [], "worst": {},
                "rows": [2, 3], "ranks": [1],
            },
        },
    }  # fmt: skip


def test_a_quantity_not_recorded_by_both_steps_has_no_verdict_in_the_dict():
    # it was written "agrees": true, "scaled_agrees": true, where the table says "skipped";
    # then max_abs 0.0, relative 0.0, as if it agreed: no measure at all
    queries = torch.ones(3, 1, dtype=torch.float64)
    result = compare(_gradients(queries), _gradients(), _batch(3), atol=0.5, rtol=0)
    empty = {"recorded": False, "max_abs": None, "reference_max": None, "relative": None,
             "threshold": None, "agrees": None, "scale": None, "scaled_agrees": None,
             "parameters": [], "rows": [], "columns": [], "memory_slots": [], "ranks": [],
             "worst": {}, "unscored": 0, "negatives_with_gradient": {}, "no_gradient": False}
    record = result.to_dict()
    for name in ("dL/dqueries", "dL/dcandidates", "dL/dscores", "scores"):
        assert record["quantities"][name] == {"name": name, **empty}, name
        assert (result[name].agrees, result[name].scaled_agrees) == (None, None)
    assert record["quantities"]["dL/dtheta"]["agrees"] is True
    assert (record["equivalent"], record["differing"]) == (True, [])
    assert str(result).split("\n")[5:11] == [
        "dL/dtheta          0.00e+00   0.00e+00        1  agrees",
        "dL/dqueries               -          -        -  skipped  not recorded by both steps",
        "dL/dcandidates            -          -        -  skipped  not recorded by both steps",
        "dL/dscores                -          -        -  skipped  not recorded by both steps",
        "scores                    -          -        -  skipped  not recorded by both steps",
        "",
    ]


def test_a_quantity_is_looked_up_by_its_name():
    result = _differing_result()
    assert result["dL/dscores"] is result.quantities[3]
    assert result["scores"] is result.quantities[4]


def test_an_unknown_name_is_a_key_error_that_lists_the_quantities():
    with pytest.raises(KeyError) as caught:
        _differing_result()["dL/dlogits"]
    message = (
        "'dL/dlogits' is not a quantity; the quantities are "
        "['dL/dtheta', 'dL/dqueries', 'dL/dcandidates', 'dL/dscores', 'scores']"
    )
    assert caught.value.args == (message,)
    assert str(caught.value) == message  # printed once, not inside a second pair of quotes
    assert isinstance(caught.value, GradlabError)


# --- where() ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quantity", "where"),
    [
        (QuantityComparison("scores", recorded=False), "not recorded by both steps"),
        (QuantityComparison("dL/dqueries", agrees=True, scale=1.0), ""),
        (QuantityComparison("dL/dqueries", agrees=False, scale=0.5, scaled_agrees=True),
         "= 0.5 x reference"),
        (QuantityComparison("dL/dqueries", agrees=False, scale=0.7, scaled_agrees=False), ""),
        (QuantityComparison("dL/dqueries", agrees=False, scale=math.nan), ""),
        (QuantityComparison("dL/dtheta", agrees=False, parameters=["a.weight", "a.bias"]),
         "parameters a.weight, a.bias"),
        (QuantityComparison("dL/dqueries", agrees=False, rows=[0, 1, 2, 5, 7, 8]),
         "rows 0-2, 5, 7-8"),
        (QuantityComparison("dL/dqueries", agrees=False, rows=[4], ranks=[1]), "rows 4; rank 1"),
        (QuantityComparison("dL/dqueries", agrees=False, rows=[1, 6], ranks=[0, 1]),
         "rows 1, 6; ranks 0, 1"),
        (QuantityComparison("scores", agrees=False, columns=[1, 2], memory_slots=[0, 3]),
         "columns 1-2; memory slots 0, 3"),
        (QuantityComparison("dL/dscores", agrees=False, unscored=12,
                            negatives_with_gradient={"reference": 6.0, "candidate": 1.5}),
         "12 scores never computed; negatives with gradient per query 1.5 (reference 6.0)"),
        (QuantityComparison("dL/dscores", agrees=True,
                            negatives_with_gradient={"reference": 6.0, "candidate": 6.0}), ""),
    ],
    ids=["skipped", "agrees", "a-factor", "not-a-factor", "no-scale", "parameters", "ranges",
         "one-rank", "two-ranks", "columns-and-memory", "unscored-and-negatives",
         "negatives-when-agreeing"],
)  # fmt: skip
def test_where_says_where_in_words(quantity, where):
    assert quantity.where() == where


# --- what compare() finds, through the result ------------------------------------------------


def _batch(size, memory=0):
    """``size`` items of distinct classes, and ``memory`` memory slots of other classes."""
    extra = {}
    if memory:
        extra = {"memory": torch.zeros(memory, 1, dtype=torch.float64),
                 "memory_labels": torch.arange(size, size + memory)}  # fmt: skip
    return PairedBatch(torch.zeros(size, 1), torch.zeros(size, 1), torch.arange(size), **extra)


def _gradients(queries=None, scores=None, world_size=1):
    """Gradients with a parameter gradient of ones (the same in every one: it agrees; a
    reference zero everywhere would be refused) and, when given, queries' and scores'."""
    return Gradients(
        parameters={"w": torch.ones(2, dtype=torch.float64)}, queries=queries, candidates=None,
        scores=scores, scored=None if scores is None else torch.ones(scores.shape, dtype=bool),
        score_values=None if scores is None else torch.zeros(scores.shape, dtype=torch.float64),
        loss=0.0, world_size=world_size,
    )  # fmt: skip


def _zeros(*shape):
    return torch.zeros(*shape, dtype=torch.float64)


def test_a_difference_at_the_threshold_agrees_and_one_beyond_it_differs():
    candidate = torch.tensor([[0.5], [1.0], [0.25]], dtype=torch.float64)
    result = compare(_gradients(_zeros(3, 1)), _gradients(candidate), _batch(3), atol=0.5, rtol=0)
    queries = result["dL/dqueries"]
    assert queries.threshold == 0.5 and not queries.agrees
    assert queries.rows == [1]  # row 0 differs by exactly 0.5, the threshold: it agrees


def test_a_batch_of_one_item_locates_its_one_row_and_column():
    result = compare(_gradients(_zeros(1, 1), _zeros(1, 1)),
                     _gradients(torch.ones(1, 1, dtype=torch.float64),
                                torch.ones(1, 1, dtype=torch.float64)),
                     _batch(1), atol=0.5, rtol=0)  # fmt: skip
    assert result["dL/dqueries"].rows == [0]
    assert (result["dL/dscores"].rows, result["dL/dscores"].columns) == ([0], [0])


def test_score_columns_after_the_batch_are_memory_slots():
    # B = 2 items and M = 2 memory slots: columns 0-1 are the batch's, 2-3 memory slots 0-1.
    candidate = _zeros(2, 4)
    candidate[0, 1] = 1.0
    candidate[1, 2] = 1.0  # the first memory slot
    candidate[0, 3] = 1.0
    result = compare(_gradients(scores=_zeros(2, 4)), _gradients(scores=candidate),
                     _batch(2, memory=2), atol=0.5, rtol=0)  # fmt: skip
    scores = result["dL/dscores"]
    assert (scores.rows, scores.columns, scores.memory_slots) == ([0, 1], [1], [0, 1])
    assert "rows 0-1; columns 1; memory slots 0-1" in str(result)


def test_embedding_gradients_have_rows_but_no_columns():
    # d == B + M: a query gradient as wide as the score matrix is still not a score matrix.
    candidate = _zeros(2, 2)
    candidate[0, 1] = 1.0
    result = compare(_gradients(_zeros(2, 2)), _gradients(candidate), _batch(2), atol=0.5,
                     rtol=0)  # fmt: skip
    queries = result["dL/dqueries"]
    assert (queries.rows, queries.columns, queries.memory_slots) == ([0], [], [])


@pytest.mark.parametrize(("rows", "ranks"), [([2, 3], [1]), ([0, 3], [0, 1]), ([1], [0])])
def test_the_processes_whose_rows_differ_are_named(rows, ranks):
    # Two processes over B = 4 items: rows 0-1 are process 0's, rows 2-3 process 1's.
    candidate = _zeros(4, 1)
    candidate[rows] = 1.0
    result = compare(_gradients(_zeros(4, 1)), _gradients(candidate, world_size=2), _batch(4),
                     atol=0.5, rtol=0)  # fmt: skip
    assert result.world_size == 2
    assert (result["dL/dqueries"].rows, result["dL/dqueries"].ranks) == (rows, ranks)


def _not_equivalent(reference_loss, candidate_loss, *, atol=1e-10, rtol=1e-10, cause=None,
                    untouched=False) -> EquivalenceResult:
    """dL/dscores differs, short of 8 scores; with ``untouched``, dL/dtheta differs too, the
    candidate having left it no gradient."""
    scores = QuantityComparison("dL/dscores", max_abs=0.25, reference_max=0.5, relative=0.5,
                                agrees=False, scale=0.5, scaled_agrees=False, rows=[0],
                                columns=[3], unscored=8)  # fmt: skip
    theta = QuantityComparison("dL/dtheta", max_abs=2.0, reference_max=2.0, relative=1.0,
                               agrees=False, scale=0.0, scaled_agrees=False,
                               parameters=["0.weight"], no_gradient=True)  # fmt: skip
    return EquivalenceResult(
        reference="FullBatch()", candidate="mine", loss="", dtype="float64", world_size=1,
        atol=atol, rtol=rtol, reference_loss=reference_loss, candidate_loss=candidate_loss,
        quantities=[theta, scores] if untouched else [scores], cause=cause,
    )  # fmt: skip


def test_a_verdict_gives_every_reason_it_has_in_order():
    verdict = str(_not_equivalent(1.0, 3.0, cause="its memory is written before the loss",
                                  untouched=True)).split("\n")[-1]
    assert verdict == (
        "verdict: NOT EQUIVALENT (dL/dtheta, dL/dscores differ; the candidate left no gradient "
        "in dL/dtheta: does it call backward?; the candidate never computed 8 of the "
        "reference's scores: its queries were ranked against part of the candidates only "
        "(scores within each process or chunk, none gathered); the losses differ too "
        "(reference 1, candidate 3, relative difference 2.0e+00): the candidate computes "
        "another objective; its memory is "
        "written before the loss)"
    )


@pytest.mark.parametrize(
    ("losses", "atol", "rtol", "differ"),
    [((1.0, 1.5), 0.25, 0.25, False),  # apart by exactly atol + rtol x |reference|: within
     ((1.0, 1.5 + 2**-40), 0.25, 0.25, True),
     ((1.0, 2.0), 0.0, 0.75, True),  # 1 > 0.75 x |reference| (though < 0.75 x |candidate|)
     ((2.0, 1.0), 0.0, 0.75, False)],  # 1 < 0.75 x |reference| = 1.5
)  # fmt: skip
def test_the_losses_differ_beyond_the_tolerance_of_the_reference_loss(losses, atol, rtol, differ):
    verdict = str(_not_equivalent(*losses, atol=atol, rtol=rtol)).split("\n")[-1]
    assert ("the losses differ too" in verdict) is differ


@pytest.mark.parametrize(("batch_size", "suggested"), [
    (8, "check-equivalence ... --class-sizes 2,6, in Python "
        "synthetic_problem(8, class_sizes=[2, 6])"),
    (3, "--class-sizes 1,2, in Python synthetic_problem(3, class_sizes=[1, 2])"),
    (4, "--class-sizes 1,3, in Python synthetic_problem(4, class_sizes=[1, 3])"),
    (5, "--class-sizes 2,3, in Python synthetic_problem(5, class_sizes=[2, 3])"),
    (9, "--class-sizes 2,3,4, in Python synthetic_problem(9, class_sizes=[2, 3, 4])"),
    (2, "check-equivalence ... --batch-size 16 --class-sizes 2,3,4,7, in Python "
        "synthetic_problem(16, class_sizes=[2, 3, 4, 7])"),
    (None, "check-equivalence ... --batch-size 16 --class-sizes 2,3,4,7, in Python "
           "synthetic_problem(16, class_sizes=[2, 3, 4, 7])"),
])  # fmt: skip
def test_the_note_on_classes_of_one_size_suggests_sizes_that_add_up_to_its_batch(
    batch_size, suggested
):
    # 8 = 2 + 6, 5 = 2 + 3, 9 = 2 + 3 + 4; 3 and 4 have no two distinct sizes of two or more:
    # a class of one beside the rest; a batch of 2 (or none known) has none at all: an example
    # batch of 16 = 2 + 3 + 4 + 7, named by --batch-size so that the command takes the sizes
    agreeing = [QuantityComparison(name, max_abs=0.0, reference_max=1.0, scale=1.0)
                for name in ("dL/dtheta", "dL/dqueries", "dL/dcandidates", "dL/dscores")]
    result = EquivalenceResult(
        reference="FullBatch()", candidate="mine", loss="", dtype="float64", world_size=1,
        atol=1e-10, rtol=1e-10, reference_loss=1.0, candidate_loss=1.0,
        quantities=[*agreeing, QuantityComparison("scores", recorded=False)], class_size=1,
        batch_size=batch_size,
    )  # fmt: skip
    assert str(result).endswith(suggested + ", or on a batch of your own, labels in classes of "
                                "several sizes")


def _agreeing_result(**losses) -> EquivalenceResult:
    """One process, every recorded quantity agreeing; the losses as given."""
    return EquivalenceResult(
        reference="FullBatch()", candidate="Mine()", loss="", dtype="float64", world_size=1,
        atol=1e-10, rtol=1e-10,
        quantities=[QuantityComparison("dL/dtheta", max_abs=0.0, reference_max=2.0,
                                       relative=0.0, scale=1.0)],
        **losses,
    )  # fmt: skip


def test_a_loss_that_is_not_a_number_is_noted_under_either_verdict():
    # a step that returned NaN with the right gradients was called EQUIVALENT without a word
    lines = str(_agreeing_result(reference_loss=6.5, candidate_loss=math.nan)).split("\n")
    assert lines[-2:] == [
        "verdict: EQUIVALENT",
        "note: the candidate's loss is nan: the verdict compares the gradients only, but a "
        "step that returns such a loss logs no number; check how it computes the value it "
        "returns",
    ]
    both = str(_agreeing_result(reference_loss=math.inf, candidate_loss=-math.inf))
    assert both.endswith("note: the reference's loss is inf and the candidate's loss is -inf: "
                         "the verdict compares the gradients only, but a step that returns such "
                         "losses logs no number; check how they compute the value it returns")
    differing = _differing_result()
    differing.candidate_loss = math.nan
    assert str(differing).endswith("note: the candidate's loss is nan: the verdict compares "
                                   "the gradients only, but a step that returns such a loss "
                                   "logs no number; check how it computes the value it returns")
    for fine in (_agreeing_result(reference_loss=6.5, candidate_loss=6.5),
                 _agreeing_result(reference_loss=None, candidate_loss=None)):
        assert "note:" not in str(fine)


@pytest.mark.parametrize(
    ("candidate_loss", "said"),
    [(6.2597 * (1 + 1e-8), "relative difference 1.0e-08): another objective, or the same one "
      "in another precision (float32 scores, say))"),
     (6.2597 * 1.5, "relative difference 5.0e-01): the candidate computes another objective)")],
)  # fmt: skip
def test_losses_apart_by_a_rounding_are_not_said_to_be_another_objective(candidate_loss, said):
    # scores computed in float32 gave losses 1e-8 apart, printed alike (6.2597 and 6.2597),
    # and the verdict said "the candidate computes another objective"
    result = _differing_result()
    result.reference_loss, result.candidate_loss = 6.2597, candidate_loss
    assert result.atol + result.rtol * 6.2597 < abs(candidate_loss - 6.2597)
    assert str(result).split("\n")[-1].endswith(said)
