"""What the Monitor's warnings say, word for word, and what they count.

A warning is the only thing that tells a user why a run logged nothing, or NaN: each one names
the step, what happened and the fix, comes once as a ``RuntimeWarning`` and leaves a counter on
the Monitor for the later cases. The expected texts are the documented messages, written out.
"""

from __future__ import annotations

import inspect
import math
import warnings

import pytest
import torch

import gradlab
from gradlab.monitor import EmbeddingNorms, Loss, MonitorConfig, OperatingRegion, read_jsonl
from tests.helpers.warning_frames import frame_named_by_stacklevel

B, D = 8, 4
LABELS = torch.arange(B) % 2
FIX = ("Train with the wrapped loss (loss_fn = monitor.watch(loss_fn), or a callback's "
       "callback.watch(loss_fn), then call loss_fn), or attach the Monitor to the embedding "
       "module with monitor.attach(module) (a callback's attach(trainer) only wires it to the "
       "Trainer)")  # fmt: skip


def _embeddings(step: int, bad: float | None = None) -> torch.Tensor:
    values = torch.randn(B, D, generator=torch.Generator().manual_seed(step))
    if bad is not None:
        values[2] = bad
    return values.requires_grad_(True)


def _runtime_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if w.category is RuntimeWarning]


@pytest.mark.parametrize(
    ("watch", "what"),
    [
        (True, "the loss that monitor.watch() returned was never called"),
        (False, "no watched loss or attached module has run"),
    ],
)
def test_a_step_that_logs_nothing_says_why_and_how_to_fix_it(tmp_path, watch, what):
    loss_fn = gradlab.SmoothAPLoss(0.05)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor:
            if watch:
                monitor.watch(loss_fn)  # the wrapped loss is dropped
            for step in range(2):
                loss_fn(_embeddings(step), LABELS).backward()
                monitor.step()
    assert _runtime_warnings(caught) == [  # in which folder: one of several callbacks'
        f"gradlab.Monitor: step 0 logs nothing in {str(tmp_path)!r}: {what}. {FIX}"]


def test_forwards_of_an_attached_module_are_counted_as_calls(tmp_path):
    module = torch.nn.Linear(D, D)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor = gradlab.Monitor(tmp_path, preset="cheap", every=1)
        monitor.attach(module, LABELS)
        for step in range(3):
            module(_embeddings(step))
        monitor.close()  # no monitor.step(): nothing was logged
    assert monitor.calls == 3
    assert _runtime_warnings(caught) == [
        f"gradlab.Monitor: 3 watched call(s) but monitor.step() was never called, so nothing "
        f"was logged in {str(tmp_path)!r}; call monitor.step() after each optimizer step"
    ]


def _train_with_nan_at_steps_0_and_2(tmp_path):
    quantities = [Loss(), EmbeddingNorms(), OperatingRegion()]
    records, lines = [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=quantities) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1, validate=False))
            for step in range(3):
                bad = math.nan if step != 1 else None
                loss_fn(_embeddings(step, bad), LABELS).backward()
                lines.append(inspect.currentframe().f_lineno + 1)
                records.append(monitor.step())
    return monitor, records, caught, lines


def test_non_finite_input_is_said_once_naming_every_quantity_and_counted_per_step(tmp_path):
    monitor, records, caught, _ = _train_with_nan_at_steps_0_and_2(tmp_path)
    norm_keys = ["embedding_norm_mean", "embedding_norm_min", "embedding_norm_max"]
    for record in (records[0], records[2]):
        assert all(math.isnan(record[key]) for key in [*norm_keys, "p_seed"])
    assert not any(math.isnan(records[1][key]) for key in [*norm_keys, "p_seed"])
    assert monitor.not_finite == {"embedding_norm": 2, "operating_region": 2}
    assert _runtime_warnings(caught) == [
        "gradlab.Monitor: step 0: the embeddings or scores (or dL/dS) are not finite (NaN or "
        "infinite), so embedding_norm, operating_region logged NaN for every key that reads "
        "them; later such steps are counted in monitor.not_finite without a warning"
    ]
    _, written = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in written] == [0, 1, 2]


def test_the_non_finite_warning_points_at_the_callers_step(tmp_path):
    _, _, caught, lines = _train_with_nan_at_steps_0_and_2(tmp_path)
    (told,) = [w for w in caught if w.category is RuntimeWarning]
    assert (told.filename, told.lineno) == (__file__, lines[0])


def test_a_loss_called_without_tensors_is_skipped_and_close_logs_nothing_for_it(tmp_path):
    def closure_loss():  # reads its batch from elsewhere: nothing for the Monitor to read
        return gradlab.SmoothAPLoss(0.05)(_embeddings(0), LABELS)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="cheap", every=2) as monitor:
            loss_fn = monitor.watch(closure_loss)
            for _ in range(2):  # step 0 is logged, step 1 is not: close() looks at it
                loss_fn().backward()
                monitor.step()
    assert monitor.skipped_calls == 1
    assert len([m for m in _runtime_warnings(caught) if "cannot read" in m]) == 1
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert records == []


def test_a_monitor_from_a_config_takes_every_option_of_it(tmp_path):
    options = MonitorConfig(tau=0.07, every=3, preset="cheap", sinks=("csv",), config={"lr": 0.5})
    with gradlab.Monitor.from_config(tmp_path / "run", options) as monitor:
        loss_fn = monitor.watch(lambda embeddings, labels: embeddings.pow(2).mean())
        for step in range(4):
            loss_fn(_embeddings(step), LABELS).backward()
            monitor.step()
    assert monitor.log_dir == tmp_path / "run"
    assert (monitor.tau, monitor.config["tau_from"]) == (0.07, "argument")
    assert monitor.config["lr"] == 0.5
    assert sorted(path.name for path in monitor.log_dir.iterdir()) == ["metrics.csv"]
    steps = (monitor.log_dir / "metrics.csv").read_text().splitlines()[1:]
    assert [row.split(",")[0] for row in steps] == ["0", "3"]
    with pytest.raises(gradlab.GradlabError, match=r"^options must be a MonitorConfig; got "
                       r"\{'preset': 'cheap'\}$"):  # fmt: skip
        gradlab.Monitor.from_config(tmp_path / "other", {"preset": "cheap"})


def test_a_loss_that_is_nan_on_finite_input_is_said_word_for_word_at_the_callers_step(
    tmp_path, monkeypatch
):
    told = []

    def record(message, category=UserWarning, stacklevel=1, **kwargs):  # mutmut-proof frames
        frame = frame_named_by_stacklevel(stacklevel)
        told.append((str(message), category, frame.f_code.co_filename, frame.f_lineno))

    with gradlab.Monitor(tmp_path, quantities=[Loss()]) as monitor:
        loss_fn = monitor.watch(lambda embeddings, labels: embeddings.sum() * math.nan)
        with monkeypatch.context() as patch:
            patch.setattr(warnings, "warn", record)
            lines = []
            for step in range(2):
                loss_fn(_embeddings(step), LABELS).backward()
                lines.append(inspect.currentframe().f_lineno + 1)
                monitor.step()
    assert told == [(
        "gradlab.Monitor: step 0: loss is nan while the embeddings and scores are finite: it is "
        "logged as it is (a log or a square root of 0, or a division by 0, in the loss?); later "
        "such steps are "
        "counted in monitor.not_finite['loss'] without a warning",
        RuntimeWarning, __file__, lines[0],
    )]  # fmt: skip
    assert monitor.not_finite == {"loss": 2}


def test_a_nan_gradient_of_finite_embeddings_is_said_and_counted(tmp_path):
    # another term of the objective takes a square root at 0 on one step: the embeddings, the
    # scores and the loss are finite, their gradient is NaN (logged as it is: it is what
    # training did)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="default", every=1) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            for step in range(3):
                embeddings = _embeddings(step)
                extra = (embeddings[0, 0] - embeddings[0, 0]).sqrt() if step > 0 else 0.0
                (loss_fn(embeddings, LABELS) + extra).backward()
                monitor.step()
    assert _runtime_warnings(caught) == [
        "gradlab.Monitor: step 1: embedding_grad_norm is nan while the embeddings and scores "
        "are finite: it is logged as it is (a log or a square root of 0, or a division by 0, "
        "in the loss?); later such steps are counted in monitor.not_finite"
        "['embedding_grad_norm'] without a warning"]
    assert monitor.not_finite == {"embedding_grad_norm": 2}
    records = read_jsonl(tmp_path / "metrics.jsonl")[1]
    assert [math.isnan(r["embedding_grad_norm"]) for r in records] == [False, True, True]


def test_a_nan_loss_and_its_nan_gradient_are_said_in_one_warning(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor:
            loss_fn = monitor.watch(lambda embeddings, labels: embeddings.sum() * math.nan)
            for step in range(2):
                loss_fn(_embeddings(step), LABELS).backward()
                monitor.step()
    assert _runtime_warnings(caught) == [
        "gradlab.Monitor: step 0: loss is nan, embedding_grad_norm is nan while the embeddings "
        "and scores are finite: they are logged as they are (a log or a square root of 0, or a "
        "division by 0, in the loss?); later such steps are counted in "
        "monitor.not_finite['loss'] and monitor.not_finite['embedding_grad_norm'] without a "
        "warning"]
    assert monitor.not_finite == {"loss": 2, "embedding_grad_norm": 2}


def test_non_finite_input_after_a_nan_loss_is_still_said(tmp_path):
    # the loss's own warning filled not_finite, and the input warning, due at the first
    # non-finite input, never came: the embeddings went NaN after a NaN loss in silence
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=[Loss(), EmbeddingNorms()]) as monitor:
            loss_fn = monitor.watch(lambda embeddings, labels: embeddings.sum() * math.nan)
            for step in range(3):  # finite embeddings at step 0, NaN from step 1
                bad = None if step == 0 else math.nan
                loss_fn(_embeddings(step, bad), LABELS).backward()
                monitor.step()
    assert _runtime_warnings(caught) == [
        "gradlab.Monitor: step 0: loss is nan while the embeddings and scores are finite: it is "
        "logged as it is (a log or a square root of 0, or a division by 0, in the loss?); later "
        "such steps are "
        "counted in monitor.not_finite['loss'] without a warning",
        "gradlab.Monitor: step 1: the embeddings or scores (or dL/dS) are not finite (NaN or "
        "infinite), so embedding_norm logged NaN for every key that reads them; later such "
        "steps are counted in monitor.not_finite without a warning",
    ]
    assert monitor.not_finite == {"loss": 1, "embedding_norm": 2}


@pytest.mark.parametrize("readable_step", [None, 1])
def test_a_run_whose_calls_could_not_be_read_says_at_close_that_it_logged_nothing(
    tmp_path, readable_step
):
    # one warning at the first unreadable call, then silence: the run ended with no record
    def loss_fn(images, texts):  # two embedding batches and no mask: not readable
        return (images @ texts.T).logsumexp(dim=1).mean()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=[Loss()]) as monitor:
            watched = monitor.watch(loss_fn)
            for step in range(3):
                images = _embeddings(step).requires_grad_()
                if step == readable_step:  # a readable call: something is logged
                    monitor.watch(gradlab.SmoothAPLoss(0.1))(images, LABELS).backward()
                else:
                    watched(images, _embeddings(step + 10)).backward()
                monitor.step()
    told = _runtime_warnings(caught)
    assert told[0].startswith("gradlab.Monitor: a loss call it cannot read was not logged")
    first = told[0].split("not logged (", 1)[1].split("; the call's arguments", 1)[0]
    if readable_step is None:
        assert told[1:] == [
            f"gradlab.Monitor: nothing was logged in {str(tmp_path)!r}: 3 of the 3 watched "
            f"call(s) could not be read (the first: {first}); strict=True raises at the call "
            "instead"
        ]
    else:
        assert len(told) == 1  # step 1 was logged: the first warning said it all


def test_the_nothing_logged_warning_points_at_the_close(tmp_path):
    def loss_fn(images, texts):  # two embedding batches and no mask: not readable
        return (images @ texts.T).logsumexp(dim=1).mean()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=[Loss()]) as monitor:
            monitor.watch(loss_fn)(_embeddings(0).requires_grad_(), _embeddings(10)).backward()
            monitor.step()
    assert _runtime_warnings(caught)[-1].startswith("gradlab.Monitor: nothing was logged in")
    assert caught[-1].filename == __file__  # the with block's close


def test_close_after_a_call_that_raised_does_not_blame_a_missing_step(tmp_path):
    # the schedule's error said what went wrong; close() then said "monitor.step() was never
    # called", hiding it. A later call that completes without a step is still warned about.
    flags = iter([torch.tensor(True), True])  # a tensor is no answer of a schedule
    monitor = gradlab.Monitor(tmp_path, quantities=[Loss(lambda step: next(flags))])
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    with pytest.raises(gradlab.GradlabError):
        loss_fn(_embeddings(0), LABELS)
    loss_fn(_embeddings(1), LABELS).backward()
    with pytest.warns(RuntimeWarning) as caught:
        monitor.close()
    assert [str(w.message) for w in caught] == [
        f"gradlab.Monitor: 1 watched call(s) but monitor.step() was never called, so nothing "
        f"was logged in {str(tmp_path)!r}; call monitor.step() after each optimizer step"]


def test_close_after_only_calls_that_raised_warns_nothing(tmp_path):
    monitor = gradlab.Monitor(tmp_path, quantities=[Loss(lambda step: torch.tensor(True))])
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    for seed in range(2):
        with pytest.raises(gradlab.GradlabError):
            loss_fn(_embeddings(seed), LABELS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        monitor.close()


def test_a_logged_batch_without_ranking_signal_is_said_once_for_a_loss_that_does_not(
        tmp_path):
    # a ragged last batch of one item under a loss of one's own (sentence-transformers'): the
    # ranking keys were NaN with no word; gradlab's losses warn themselves
    def own_loss(embeddings, labels):
        return embeddings.pow(2).mean()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="default", every=1) as monitor:
            loss_fn = monitor.watch(own_loss)
            for size in (B, 1, 1):
                loss_fn(_embeddings(size)[:size], LABELS[:size]).backward()
                monitor.step()
    assert _runtime_warnings(caught) == [
        "gradlab.Monitor: step 1: the logged batch has no query with both a positive and a "
        "negative (a batch of one item, of one class, or of singletons: a ragged last batch?), "
        "so the quantities that rank its pairs are NaN for it; degenerate_batch marks such "
        "steps (later ones are not warned about)"]
    records = read_jsonl(tmp_path / "metrics.jsonl")[1]
    assert [r["degenerate_batch"] for r in records] == [0.0, 1.0, 1.0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path / "own", preset="default", every=1) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            loss_fn(_embeddings(0)[:1], LABELS[:1]).backward()
            monitor.step()
    assert _runtime_warnings(caught) == []  # the loss's DegenerateBatchWarning says it


def _two_steps(tmp_path, quantity):
    """Two logged steps of SmoothAP with ``Loss`` and ``quantity``: the Monitor and the
    warnings recorded."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=[Loss(), quantity]) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            for step in range(2):
                loss_fn(_embeddings(step), LABELS).backward()
                monitor.step()
    return monitor, caught


def test_a_non_finite_value_of_a_quantity_of_yours_points_at_its_compute(tmp_path):
    # its NaN was said to come from "a division by 0, in the loss?", and named by the
    # quantity, not by its key
    class Spread(gradlab.monitor.Quantity):
        name = "spread"
        needs = frozenset({"embeddings"})
        keys = ("spread_ratio",)
        warns_if_not_finite = True

        def compute(self, batch):
            zero = batch.embeddings.new_zeros(())
            return {"spread_ratio": zero / zero}  # 0 / 0: a bug of its own

    _, caught = _two_steps(tmp_path, Spread())
    assert _runtime_warnings(caught) == [
        "gradlab.Monitor: step 0: spread_ratio (of spread) is nan while the embeddings and "
        "scores are finite: it is logged as it is (a log or a square root of 0, or a division "
        "by 0, in the compute() of spread?); later such steps are counted in "
        "monitor.not_finite['spread'] without a warning"]


@pytest.mark.parametrize("declared", [None, False])
def test_a_quantity_of_yours_warns_of_its_nan_unless_it_says_a_nan_means_something(
    tmp_path, declared
):
    # warns_if_not_finite defaulted to False: a NaN of one's own compute was logged every
    # step without a word, where setting it True gave the warning above
    class Ratio(gradlab.monitor.Quantity):
        name = "ratio"
        needs = frozenset({"embeddings"})
        keys = ("ratio_value",)

        def compute(self, batch):
            zero = batch.embeddings.new_zeros(())
            return {"ratio_value": zero / zero}

    if declared is not None:
        Ratio.warns_if_not_finite = declared
    monitor, caught = _two_steps(tmp_path, Ratio())
    said = [w for w in _runtime_warnings(caught) if "ratio_value" in w]
    assert len(said) == (1 if declared is None else 0)
    assert monitor.not_finite == ({"ratio": 2} if declared is None else {})


class _ZeroOverZero(gradlab.monitor.Quantity):
    needs = frozenset({"embeddings"})
    warns_if_not_finite = True

    def compute(self, batch):
        zero = batch.embeddings.new_zeros(())
        return {self.keys[0]: zero / zero}  # 0 / 0: a bug of its own


class _Spread(_ZeroOverZero):
    name, keys = "spread", ("spread_ratio",)


class _Skew(_ZeroOverZero):
    name, keys = "skew", ("skew_ratio",)


def _nan_loss(embeddings, labels):
    return (embeddings * 0.0).sum() + math.nan  # NaN, with a finite (zero) gradient


@pytest.mark.parametrize(("loss", "quantities", "values", "where", "counters"), [
    (gradlab.SmoothAPLoss(0.05), [_Spread, _Skew],
     "spread_ratio (of spread) is nan, skew_ratio (of skew) is nan",
     "the compute() of spread, skew",
     "monitor.not_finite['spread'] and monitor.not_finite['skew']"),
    (_nan_loss, [Loss, _Spread, _Skew],
     "loss is nan, spread_ratio (of spread) is nan, skew_ratio (of skew) is nan",
     "the loss, or the compute() of spread, skew",
     "monitor.not_finite['loss'] and monitor.not_finite['spread'] and "
     "monitor.not_finite['skew']"),
])  # fmt: skip
def test_non_finite_values_of_several_quantities_are_said_in_one_warning(
    tmp_path, loss, quantities, values, where, counters
):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=[q() for q in quantities]) as monitor:
            loss_fn = monitor.watch(loss)
            loss_fn(_embeddings(0).requires_grad_(True), LABELS).backward()
            monitor.step()
    assert _runtime_warnings(caught) == [
        f"gradlab.Monitor: step 0: {values} while the embeddings and scores are finite: they "
        f"are logged as they are (a log or a square root of 0, or a division by 0, in {where}?); "
        f"later such steps are counted in {counters} without a warning"]


def test_a_subclass_of_gradlabs_loss_with_a_schedule_of_its_own_still_blames_the_loss(tmp_path):
    # the subclass's module is yours, its compute gradlab's: the NaN is the loss's own
    class EveryStepLoss(Loss):
        pass

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=[EveryStepLoss()]) as monitor:
            loss_fn = monitor.watch(lambda embeddings, labels: embeddings.sum() * math.nan)
            loss_fn(_embeddings(0), LABELS).backward()
            monitor.step()
    assert _runtime_warnings(caught) == [
        "gradlab.Monitor: step 0: loss is nan while the embeddings and scores are finite: it is "
        "logged as it is (a log or a square root of 0, or a division by 0, in the loss?); later "
        "such steps are counted in monitor.not_finite['loss'] without a warning"]


def test_the_not_backpropagated_warning_points_at_the_callers_step(tmp_path):
    embeddings = _embeddings(0).requires_grad_()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="full", every=1) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            loss = loss_fn(embeddings, LABELS)
            loss_fn(embeddings, LABELS).item()  # for display, never backpropagated
            loss.backward()
            line = inspect.currentframe().f_lineno + 1
            monitor.step()
    (told,) = [w for w in caught if "was not backpropagated" in str(w.message)]
    assert (told.filename, told.lineno) == (__file__, line)


def test_what_a_quantity_says_of_its_numbers_points_at_the_callers_step(tmp_path):
    class Telling(Loss):
        name = "telling"

        def said_of_logged(self, logged, batch):
            return "a fact the numbers hide"

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=[Telling()]) as monitor:
            monitor.watch(gradlab.SmoothAPLoss(0.05))(
                _embeddings(0).requires_grad_(), LABELS).backward()
            line = inspect.currentframe().f_lineno + 1
            monitor.step()
    (told,) = [w for w in caught if "a fact the numbers hide" in str(w.message)]
    assert str(told.message) == "gradlab.Monitor: step 0: a fact the numbers hide"
    assert (told.filename, told.lineno) == (__file__, line)


@pytest.mark.parametrize("also_off_the_diagonal", [False, True])
def test_a_masked_diagonal_watched_as_scores_is_said_to_be_in_batch_scores(
    tmp_path, also_off_the_diagonal
):
    # a batch scored against itself, its own column masked with -inf, watched with
    # inputs="scores": every step logged NaN, and the warning did not name the fix
    positives = torch.roll(torch.eye(6, dtype=torch.bool), 1, dims=1)  # view pairs

    def info_nce(scores, positives):
        return torch.nn.functional.cross_entropy(scores / 0.1, positives.int().argmax(1))

    scores = torch.randn(6, 6, generator=torch.Generator().manual_seed(0))
    scores.fill_diagonal_(-math.inf)
    if also_off_the_diagonal:
        scores[0, 1] = math.nan
    with gradlab.Monitor(tmp_path / "run", every=1) as monitor:
        watched = monitor.watch(info_nce, inputs="scores")
        with pytest.warns(RuntimeWarning) as caught:
            watched(scores.requires_grad_(), positives).backward()
            monitor.step()
    said = [str(w.message) for w in caught if "are not finite" in str(w.message)]
    assert len(said) == 1
    # at the line that called monitor.step()
    assert [w.filename for w in caught if "are not finite" in str(w.message)] == [__file__]
    hint = ("only the score matrix's diagonal is, the mask of each query's own column in a "
            "batch scored against itself: watched with inputs='in_batch_scores', that column "
            "is no candidate and its value is not read")
    assert (hint in said[0]) is not also_off_the_diagonal
    if not also_off_the_diagonal:  # as said: watched so, the step logs numbers
        with gradlab.Monitor(tmp_path / "in_batch", every=1) as monitor:
            watched = monitor.watch(info_nce, inputs="in_batch_scores")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the scale of its scores, not cosines
                watched(scores.detach().requires_grad_(), positives).backward()
                record = monitor.step()
        assert not monitor.not_finite and math.isfinite(record["p_without_query"])


@pytest.mark.parametrize("case", ["rectangular scores", "square embeddings"])
def test_a_not_finite_diagonal_that_is_no_batch_against_itself_gets_no_such_hint(
    tmp_path, case
):
    # queries against other candidates, or [B, B] embeddings: their (i, i) entries are no
    # query's own column, and in_batch_scores would not fit them
    generator = torch.Generator().manual_seed(0)
    if case == "rectangular scores":
        first = torch.randn(4, 6, generator=generator)
        second = torch.zeros(4, 6, dtype=torch.bool)
        second[:, 5] = True
        loss_fn = gradlab.NTXentLoss(0.1, validate=False)
    else:
        first = torch.randn(8, 8, generator=generator)
        second = torch.arange(4).repeat_interleave(2)
        loss_fn = gradlab.SmoothAPLoss(0.1, validate=False)
    first.diagonal().fill_(math.nan)
    with gradlab.Monitor(tmp_path / "run", every=1) as monitor:
        watched = monitor.watch(loss_fn, inputs="embeddings" if case != "rectangular scores"
                                else None)  # fmt: skip
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            watched(first.requires_grad_(), second).backward()
            monitor.step()
    said = [str(w.message) for w in caught if "are not finite" in str(w.message)]
    assert len(said) == 1 and "in_batch_scores" not in said[0]
