"""SmoothAPLoss against the loop reference and pytorch-metric-learning."""

import os
import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import gradlab
from gradlab import GradlabError, SmoothAPLoss
from tests.helpers.warning_frames import frame_named_by_stacklevel
from tests.reference.smooth_ap_loops import (
    cross_modal_smooth_ap,
    in_batch_smooth_ap,
    loss_from_aps,
)

MARGIN_REFUSED = (r"margin must be a finite number in \[0, 1e\+30\] \(larger margins overflow "
                  r"float32\)")


def embeddings_for(seed, size, dims=5):
    return torch.randn(
        size, dims, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )


@given(
    seed=st.integers(0, 2**31 - 1),
    labels=st.lists(st.integers(0, 4), min_size=1, max_size=12),
    include_query=st.booleans(),
    tau=st.sampled_from([0.01, 0.1]),
)
@pytest.mark.slow
def test_in_batch_loss_matches_reference(seed, labels, include_query, tau):
    embeddings = embeddings_for(seed, len(labels))
    got = SmoothAPLoss(tau, include_query=include_query)(embeddings, torch.tensor(labels))
    expected = loss_from_aps(in_batch_smooth_ap(embeddings.tolist(), labels, tau, include_query))
    assert got.item() == pytest.approx(expected, abs=1e-12)


@given(
    seed=st.integers(0, 2**31 - 1),
    images=st.integers(1, 5),
    captions_per_image=st.integers(1, 5),
)
@pytest.mark.slow
def test_cross_modal_loss_matches_reference_both_directions(seed, images, captions_per_image):
    image_embeddings = embeddings_for(seed, images)
    caption_embeddings = embeddings_for(seed + 1, images * captions_per_image)
    image_of_caption = torch.arange(images).repeat_interleave(captions_per_image)
    image_to_caption = image_of_caption.unsqueeze(0) == torch.arange(images).unsqueeze(1)
    loss = SmoothAPLoss(0.01)
    for queries, candidates, positives in (
        (image_embeddings, caption_embeddings, image_to_caption),
        (caption_embeddings, image_embeddings, image_to_caption.T.contiguous()),
    ):
        expected = loss_from_aps(
            cross_modal_smooth_ap(queries.tolist(), candidates.tolist(), positives.tolist(), 0.01)
        )
        got = loss(queries, candidates=candidates, positives=positives).item()
        assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.slow
def test_gradient_matches_autograd_path_and_finite_differences():
    from gradlab.functional import in_batch_layout, smooth_ap

    embeddings = embeddings_for(3, 12).requires_grad_(True)
    labels = torch.tensor([0, 1, 2] * 4)
    SmoothAPLoss(0.05)(embeddings, labels).backward()
    # The same loss built by hand with torch differentiating the forward (backward="autograd").
    leaf = embeddings.detach().clone().requires_grad_(True)
    scores, positives, candidate_mask = in_batch_layout(leaf, labels)
    aps = smooth_ap(scores, positives, 0.05, candidate_mask=candidate_mask, backward="autograd")
    (1 - aps[~aps.isnan()].mean()).backward()
    torch.testing.assert_close(embeddings.grad, leaf.grad, rtol=1e-10, atol=1e-12)
    assert embeddings.grad.abs().sum() > 0
    assert torch.autograd.gradcheck(
        lambda e: SmoothAPLoss(0.05)(e, labels), (embeddings.detach().clone().requires_grad_(True),)
    )


def test_batch_without_any_positive_gives_zero_loss_and_zero_gradient():
    embeddings = embeddings_for(0, 4).requires_grad_(True)
    loss = SmoothAPLoss()(embeddings, torch.arange(4))
    loss.backward()
    assert loss.item() == 0.0
    assert torch.equal(embeddings.grad, torch.zeros_like(embeddings))


def test_single_class_batch_has_zero_loss():
    embeddings = embeddings_for(1, 6)
    assert SmoothAPLoss()(embeddings, torch.zeros(6, dtype=torch.long)).item() == pytest.approx(0.0)


# pytorch-metric-learning's SmoothAPLoss (2.x) reshapes the batch with
# ``view(per_class, n_classes, d)``: its positive groups are consecutive blocks of *n_classes*
# items. It equals SmoothAP (with the query as its own candidate) only when the number of
# classes equals the class size; otherwise it optimizes a different grouping.
SQUARE_LAYOUTS = [[0, 0, 1, 1], [7, 7, 7, 3, 3, 3, 5, 5, 5], [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4]
NON_SQUARE_LAYOUTS = [[0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 2, 2], [0] * 4 + [1] * 4 + [2] * 4]


def pml_loss(embeddings, labels):
    losses = pytest.importorskip("pytorch_metric_learning.losses")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return losses.SmoothAPLoss(temperature=0.01)(embeddings, labels).item()


@pytest.mark.parametrize("labels", SQUARE_LAYOUTS)
def test_equals_pytorch_metric_learning_where_its_layout_assumption_holds(labels):
    embeddings = embeddings_for(len(labels), len(labels))
    ours = SmoothAPLoss(0.01, include_query=True)(embeddings, torch.tensor(labels)).item()
    assert pml_loss(embeddings, torch.tensor(labels)) == pytest.approx(ours, abs=1e-6)


@pytest.mark.parametrize("labels", NON_SQUARE_LAYOUTS)
def test_pytorch_metric_learning_groups_blocks_of_class_count(labels):
    embeddings = embeddings_for(len(labels), len(labels))
    truth = loss_from_aps(in_batch_smooth_ap(embeddings.tolist(), labels, 0.01, True))
    n_classes = len(set(labels))
    blocks = [index // n_classes for index in range(len(labels))]
    what_pml_computes = loss_from_aps(in_batch_smooth_ap(embeddings.tolist(), blocks, 0.01, True))
    ours = SmoothAPLoss(0.01, include_query=True)(embeddings, torch.tensor(labels)).item()
    pml = pml_loss(embeddings, torch.tensor(labels))
    assert ours == pytest.approx(truth, abs=1e-12)
    assert pml == pytest.approx(what_pml_computes, abs=1e-6)
    assert abs(pml - truth) > 1e-3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tau": 0}, r"tau must be a finite number in \[1e-30, inf\) .*; got 0$"),
        ({"tau": float("nan")}, r"tau must be a finite number in \[1e-30, inf\)"),
        ({"include_query": 1}, "include_query must be True or False; got 1"),
    ],
)
def test_constructor_errors(kwargs, message):
    with pytest.raises(GradlabError, match=message):
        SmoothAPLoss(**kwargs)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((torch.zeros(4, 2),), {}, r"takes loss\(embeddings, labels\) or loss\(queries, "
         r"candidates=candidates, positives=positives\); labels is missing$"),
        ((torch.zeros(4, 2), torch.zeros(4, dtype=torch.long), 1, 2), {},
         "got 4 positional arguments"),
        ((torch.zeros(4, 2), torch.zeros(4)), {}, "labels must have an integer dtype"),
        ((torch.zeros(4, 2),),
         {"candidates": torch.zeros(4, 2), "positives": torch.ones(4, 3, dtype=torch.bool)},
         r"\(4, 4\)"),
        ((torch.randn(4, 2),),
         {"candidates": torch.randn(3, 2, dtype=torch.float64), "positives": torch.ones(4, 3) > 0},
         "queries torch.float32 and candidates torch.float64"),
        ((torch.randn(16, 0), torch.arange(16) % 4), {}, "at least one embedding dimension"),
    ],
)  # fmt: skip
def test_forward_errors(args, kwargs, message):
    with pytest.raises(GradlabError, match=message):
        SmoothAPLoss()(*args, **kwargs)


def test_include_query_is_refused_in_a_cross_modal_call_where_it_would_change_nothing():
    # the queries are no candidates of their own there: the option was silently ignored
    queries, candidates = torch.randn(3, 4), torch.randn(5, 4)
    positives = torch.eye(3, 5, dtype=torch.bool)
    expected = ("SmoothAPLoss: include_query=True applies only to the in-batch form, "
                "loss(embeddings, labels), where each query is one of its own candidates; the "
                "cross-modal form ranks queries against separate candidates: pass "
                "include_query=False for it")
    with pytest.raises(GradlabError) as caught:
        SmoothAPLoss(include_query=True)(queries, candidates=candidates, positives=positives)
    assert str(caught.value) == expected
    with pytest.raises(GradlabError) as caught:
        gradlab.functional.smooth_ap_loss(queries, candidates=candidates, positives=positives,
                                          include_query=True)
    assert str(caught.value) == expected.replace("SmoothAPLoss", "smooth_ap_loss")


# --- FAPPYLoss(normalization=...) -------------------------------------------------------------


def test_fappy_module_normalization_default_and_repr():
    from gradlab import FAPPYLoss

    assert FAPPYLoss().normalization == "paper"
    assert "normalization='official'" in repr(FAPPYLoss(normalization="official"))


def test_fappy_module_official_matches_the_caffe_loop():
    from gradlab import FAPPYLoss
    from tests.reference.histogram_losses_loops import fappy_algorithm1, fappy_official

    generator = torch.Generator().manual_seed(11)
    embeddings = torch.randn(10, 4, generator=generator, dtype=torch.float64)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3, 3])
    for normalization, loop in (("paper", fappy_algorithm1), ("official", fappy_official)):
        got = FAPPYLoss(0.05, normalization=normalization)(embeddings, labels).item()
        assert got == pytest.approx(loop(embeddings.tolist(), labels.tolist(), 0.05), abs=1e-12)


def test_fappy_module_deltas_follow_a_delta_min_changed_after_construction():
    # was: deltas were computed once in __init__ and went stale (the call used the new ones)
    from gradlab import FAPPYLoss

    loss = FAPPYLoss(0.01)
    loss.delta_min = 0.3
    halving = [2.0]
    while halving[-1] / 2 >= 0.3:
        halving.append(halving[-1] / 2)
    assert loss.deltas == halving == [2.0, 1.0, 0.5]
    embeddings = torch.randn(6, 3, generator=torch.Generator().manual_seed(2))
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    assert torch.equal(loss(embeddings, labels), FAPPYLoss(0.3)(embeddings, labels))


# --- score-matrix modules: degenerate batches warn as SmoothAPLoss does ------------------------


@pytest.mark.parametrize(
    "loss_fn", [lambda: gradlab.MaxViolationTripletLoss(0.2), lambda: gradlab.NTXentLoss(0.1)]
)
def test_score_matrix_modules_warn_once_and_count_degenerate_batches(loss_fn):
    from gradlab.losses import DegenerateBatchWarning

    loss = loss_fn()
    no_positive = torch.zeros(3, 4, dtype=torch.bool)
    fine = torch.eye(3, 4, dtype=torch.bool)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss(torch.rand(3, 4), no_positive)
        loss(torch.rand(3, 4), fine)
        loss(torch.rand(3, 4), no_positive)
    flagged = [w for w in caught if w.category is DegenerateBatchWarning]
    assert len(flagged) == 1
    if "MUTANT_UNDER_TEST" not in os.environ:  # mutmut's trampolines add stack frames
        assert flagged[0].filename == __file__  # points at the caller's line
    assert type(loss).__name__ in str(flagged[0].message)
    assert loss.degenerate_batches == 2


EYE3 = torch.eye(3, dtype=torch.bool)


@pytest.mark.parametrize("cls", ["MaxViolationTripletLoss", "NTXentLoss"])
@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((torch.full((3, 3), float("nan")), EYE3), {}, "scores must be finite"),
        ((torch.randn(0, 0), torch.zeros(0, 0, dtype=torch.bool)), {}, "at least one row"),
        ((torch.zeros(3, 3), EYE3), {"validate": "yes"}, "validate must be True or False"),
    ],
)
def test_score_matrix_module_errors(cls, args, kwargs, message):
    with pytest.raises(GradlabError, match=message):
        getattr(gradlab, cls)(**kwargs)(*args)


@pytest.mark.parametrize("cls", ["MaxViolationTripletLoss", "NTXentLoss"])
def test_score_matrix_module_with_validate_false_reads_nothing_back(cls, monkeypatch):
    loss = getattr(gradlab, cls)(validate=False)
    calls = []
    for name in ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__"):
        original = getattr(torch.Tensor, name)

        def spy(self, *args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, spy)
    value = loss(torch.full((3, 4), float("nan")), torch.zeros(3, 4, dtype=torch.bool))
    monkeypatch.undo()
    assert calls == []
    assert loss.degenerate_batches == 0
    assert value.item() == 0.0 or torch.isnan(value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((torch.zeros(4, 2),) * 3, r"got 3 positional arguments \(cross-modal: pass"),
        ((torch.zeros(4, 2),) * 4, r"got 4 positional arguments \(cross-modal: pass"),
    ],
)
def test_cross_modal_tensors_by_position_are_refused_with_the_keyword_form(args, message):
    with pytest.raises(GradlabError, match=message):
        SmoothAPLoss()(*args)


@pytest.mark.parametrize("cls", ["MaxViolationTripletLoss", "NTXentLoss"])
def test_score_matrix_module_refuses_a_non_callable_score_recorder_when_set(cls):
    loss = getattr(gradlab, cls)()
    with pytest.raises(GradlabError, match="score_recorder must be None or a callable"):
        loss.score_recorder = 5  # was accepted, then failed at call time naming on_scores
    assert loss.score_recorder is None
    seen = []
    loss.score_recorder = lambda direction, alias, mask: seen.append(direction)
    loss(torch.rand(2, 3), torch.eye(2, 3, dtype=torch.bool))
    assert seen == ["i2t", "t2i"]


# --- every constructor argument named in its error; the warning with the first such batch -----


@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        ("BlackboxAPLoss", {"interpolation": 1e-46},
         r"interpolation must be a finite number in \[1e-30, 1e\+30\]"),
        ("BlackboxAPLoss", {"margin": -0.1},
         MARGIN_REFUSED),
        ("FAPPYLoss", {"delta_min": 0.0}, r"delta_min must be a finite number in \[9.5367"),
        ("FastAPLoss", {"num_bins": 0}, r"num_bins must be an integer from 1 to 16384 "),
        ("FastAPLoss", {"num_bins": 2**14 + 1}, r"num_bins must be an integer from 1 to 16384 "),
        ("MaxViolationTripletLoss", {"margin": -1.0}, r"margin must be a finite number in \[0, "),
        ("NTXentLoss", {"temperature": 0.0}, r"temperature must be a finite number in \[1e-30"),
        ("NTXentLoss", {"direction": "up"}, r"direction must be one of .*; got 'up'"),
        ("MaxViolationTripletLoss", {"reduction": "max"}, r"reduction must be one of .*'max'"),
        ("SmoothAPLoss", {"validate": "yes"}, "validate must be True or False; got 'yes'"),
    ],
)
def test_every_constructor_argument_is_named_in_its_error(cls, kwargs, message):
    with pytest.raises(GradlabError, match=message):
        getattr(gradlab, cls)(**kwargs)


@pytest.mark.parametrize(
    ("make", "degenerate", "fine"),
    [
        (lambda: SmoothAPLoss(0.1), (torch.randn(4, 3), torch.arange(4)),
         (torch.randn(4, 3), torch.tensor([0, 0, 1, 1]))),
        (lambda: gradlab.NTXentLoss(), (torch.rand(3, 4), torch.zeros(3, 4, dtype=torch.bool)),
         (torch.rand(3, 4), torch.eye(3, 4, dtype=torch.bool))),
    ],
)  # fmt: skip
def test_the_warning_comes_with_the_first_degenerate_batch_and_every_one_is_counted(
    make, degenerate, fine
):
    from gradlab.losses import DegenerateBatchWarning

    loss = make()
    seen = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for arguments in (fine, degenerate, fine, degenerate, degenerate):
            loss(*arguments)
            seen.append(sum(w.category is DegenerateBatchWarning for w in caught))
    assert seen == [0, 1, 1, 1, 1]
    assert loss.degenerate_batches == 3


@pytest.mark.parametrize(
    ("make", "degenerate"),
    [
        (lambda: SmoothAPLoss(0.1), (torch.randn(4, 3), torch.arange(4))),
        (lambda: gradlab.NTXentLoss(), (torch.rand(3, 4), torch.zeros(3, 4, dtype=torch.bool))),
        (lambda: gradlab.MaxViolationTripletLoss(0.2),
         (torch.rand(3, 4), torch.zeros(3, 4, dtype=torch.bool))),
    ],
)  # fmt: skip
def test_the_degenerate_batch_warning_names_the_line_that_called_the_loss(
    monkeypatch, make, degenerate
):
    """The stacklevel is checked under mutation testing too (trampoline frames not counted)."""
    from gradlab.losses import DegenerateBatchWarning

    named = []

    def record(message, category=UserWarning, stacklevel=1, **kwargs):
        if category is DegenerateBatchWarning:
            named.append(frame_named_by_stacklevel(stacklevel).f_code.co_filename)

    loss = make()
    monkeypatch.setattr(warnings, "warn", record)
    loss(*degenerate)
    assert named == [__file__]


def test_blackbox_ap_loss_passes_its_margin_to_the_forward():
    from tests.reference.histogram_losses_loops import ranked_ap

    embeddings = embeddings_for(17, 9, dims=4)
    labels = [0, 1, 2] * 3
    normalized = torch.nn.functional.normalize(embeddings, dim=1)
    scores = (normalized @ normalized.T).tolist()
    for margin in (0.0, 0.3):
        aps = []
        for q in range(9):
            others = [c for c in range(9) if c != q]
            aps.append(ranked_ap([scores[q][c] for c in others],
                                 [labels[c] == labels[q] for c in others], margin))  # fmt: skip
        got = gradlab.BlackboxAPLoss(margin=margin)(embeddings, torch.tensor(labels)).item()
        assert got == pytest.approx(loss_from_aps(aps), abs=1e-10)


def test_fappy_module_keeps_its_scales():
    assert gradlab.FAPPYLoss(delta_min=0.25).deltas == [2.0, 1.0, 0.5, 0.25]


# --- on a CUDA device (marked gpu: run by tools/device_check.sh) ------------------------------

CUDA_CASES = {
    "SmoothAPLoss": (lambda: gradlab.SmoothAPLoss(0.05), "embeddings"),
    "FastAPLoss": (lambda: gradlab.FastAPLoss(), "embeddings"),
    "BlackboxAPLoss": (lambda: gradlab.BlackboxAPLoss(), "embeddings"),
    "FAPPYLoss": (lambda: gradlab.FAPPYLoss(0.05), "embeddings"),
    "NTXentLoss": (lambda: gradlab.NTXentLoss(0.1), "scores"),
    "MaxViolationTripletLoss": (lambda: gradlab.MaxViolationTripletLoss(0.2), "scores"),
}


def _loss_and_gradient(name, device):
    make, form = CUDA_CASES[name]
    embeddings = torch.nn.functional.normalize(embeddings_for(11, 40, dims=8), dim=1)
    labels = torch.arange(40) % 10
    if form == "embeddings":
        leaf = embeddings.to(device).requires_grad_(True)
        loss = make()(leaf, labels.to(device))
    else:
        leaf = (embeddings[:10] @ embeddings.T).to(device).requires_grad_(True)
        positives = torch.arange(10).unsqueeze(1) == labels.unsqueeze(0)
        loss = make()(leaf, positives.to(device))
    loss.backward()
    assert loss.device.type == torch.device(device).type and leaf.grad.device == leaf.device
    return loss.detach().cpu(), leaf.grad.cpu()


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CUDA_CASES))
def test_each_loss_on_cuda_gives_the_cpus_value_and_gradient(name):
    cpu_loss, cpu_grad = _loss_and_gradient(name, "cpu")
    cuda_loss, cuda_grad = _loss_and_gradient(name, "cuda")
    assert cpu_grad.abs().sum() > 0
    torch.testing.assert_close(cuda_loss, cpu_loss, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(cuda_grad, cpu_grad, rtol=1e-7, atol=1e-10)
