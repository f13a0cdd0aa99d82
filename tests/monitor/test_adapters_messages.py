"""What the loss adapters tell a user whose call or loss they cannot read.

A watched call the Monitor cannot read is reported with the form it expected and what it got
(types and shapes); an unmet need names the need and why; the loss is named as the user wrote
it. The wording is the behaviour here: the tests compare whole messages.
"""

from __future__ import annotations

import pytest
import torch

import gradlab
from gradlab import GradlabError
from gradlab.monitor import adapters

EMBEDDINGS_FORM = (
    "loss(embeddings [B, d], labels [B]) or loss(queries [Q, d], candidates=[C, d], "
    "positives=[Q, C] bool)"
)
SCORES_FORM = "loss(scores [Q, C], positives [Q, C] bool or labels [B] of a square batch)"


def _message(call) -> str:
    with pytest.raises(GradlabError) as caught:
        call()
    return str(caught.value)


CLIP_HINT = (": two batches of embeddings (a CLIP-style loss) are read as queries and "
             "candidates with their [Q, C] bool positives as a third argument (torch.eye(B, "
             "dtype=torch.bool) for paired rows); a loss that takes no such mask can be watched "
             "on the score matrix it computes (inputs='scores')")


def _smooth_ap_read(tensors):
    return adapters.adapt(gradlab.SmoothAPLoss(0.05)).read(tensors, None, 0.05)


@pytest.mark.parametrize(
    ("tensors", "got"),
    [
        ([], "no argument"),
        ([torch.zeros(4, 3)], "1 argument(s): (Tensor[4, 3])"),
        ([torch.zeros(4, 3), 3], "2 argument(s): (Tensor[4, 3], int)"),
        ([torch.zeros(4), torch.arange(4)], "2 argument(s): (Tensor[4], Tensor[4]): the first "
         "argument is a 1-D torch.float32 tensor, not a 2-D float one"),
        ([torch.zeros(4, 3, dtype=torch.int64), torch.arange(4)],
         "2 argument(s): (Tensor[4, 3], Tensor[4]): the first argument is a 2-D torch.int64 "
         "tensor, not a 2-D float one"),
        # queries and candidates without the positive mask: said how to give it
        ([torch.zeros(2, 3), torch.zeros(5, 3)],
         "2 argument(s): (Tensor[2, 3], Tensor[5, 3])" + CLIP_HINT),
        ([torch.zeros(2, 3), torch.zeros(5, 3), 0.5],
         "3 argument(s): (Tensor[2, 3], Tensor[5, 3], float)" + CLIP_HINT),
    ],
)  # fmt: skip
def test_a_call_without_the_embedding_form_says_what_was_expected_and_what_came(tensors, got):
    assert _message(lambda: _smooth_ap_read(tensors)) == f"expected {EMBEDDINGS_FORM}; got {got}"


def test_a_score_loss_call_without_its_form_names_the_score_form():
    adapter = adapters.adapt(gradlab.NTXentLoss(0.1))
    message = _message(lambda: adapter.read([torch.zeros(3, 3)], None, 0.1))
    assert message == f"expected {SCORES_FORM}; got 1 argument(s): (Tensor[3, 3])"


def test_extra_arguments_after_the_form_are_not_read():
    embeddings, labels = torch.randn(4, 3), torch.tensor([0, 0, 1, 1])
    batch = _smooth_ap_read([embeddings, labels, 0.5, "mean"])
    assert batch.labels is labels and torch.equal(batch.embeddings, embeddings)


@pytest.mark.parametrize(
    ("tensors", "message"),
    [
        ([torch.zeros(4, 3), torch.zeros(4)],
         "labels must have an integer dtype; got torch.float32"
         " (whole-number ids: pass labels.long())"),
        ([torch.zeros(4, 3), torch.zeros(4, 2, dtype=torch.int64)],
         "labels must be 1-D; got shape (4, 2)"),
        ([torch.zeros(4, 3), torch.arange(3)],
         "labels must have shape (4,) (one label per embedding); got (3,)"),
        ([torch.zeros(2, 3), torch.zeros(5, 3), torch.zeros(2, 5)],
         "positives must be a bool tensor; got torch.float32 (a 0/1 mask: pass positives.bool())"),
        ([torch.zeros(2, 3), torch.zeros(5, 3), torch.zeros(2, dtype=torch.bool)],
         "positives must be 2-D; got shape (2,)"),
        ([torch.zeros(2, 3), torch.zeros(5, 3), torch.zeros(2, 4, dtype=torch.bool)],
         "positives must have shape (2, 5) ([Q, C]); got (2, 4)"),
    ],
)  # fmt: skip
def test_bad_targets_are_refused_naming_the_argument_and_what_is_allowed(tensors, message):
    assert _message(lambda: _smooth_ap_read(tensors)) == message


def test_a_loss_that_is_not_callable_is_refused_with_its_type_and_value():
    assert _message(lambda: adapters.adapt(42)) == (
        "loss_fn must be callable (a loss module or function); got int 42"
    )


def test_a_loss_class_instead_of_an_instance_is_refused_before_any_call():
    """watch(gradlab.SmoothAPLoss) without parentheses: refused at watch, not at the first step."""
    import gradlab

    assert _message(lambda: adapters.adapt(gradlab.SmoothAPLoss)) == (
        "loss_fn must be a loss module or function, not a class; got the class SmoothAPLoss "
        "(create the loss first: SmoothAPLoss(...))"
    )


def test_a_registry_that_recognises_nothing_names_the_loss(monkeypatch):
    def my_loss(embeddings, labels):
        return embeddings.sum()

    monkeypatch.setattr(adapters, "ADAPTERS", [lambda loss_fn, inputs: None])
    assert _message(lambda: adapters.adapt(my_loss)) == "no loss adapter recognises my_loss"


def test_a_loss_is_named_by_its_function_or_class_name():
    def my_ranking_loss(embeddings, labels):
        return embeddings.sum()

    assert adapters.loss_name(my_ranking_loss) == "my_ranking_loss"
    assert adapters.loss_name(gradlab.NTXentLoss(0.1)) == "NTXentLoss"
    assert adapters.adapt(my_ranking_loss).name == "the watched loss my_ranking_loss"
    assert adapters.adapt(gradlab.NTXentLoss(0.1)).name == "the watched loss NTXentLoss"
    assert adapters.adapt(gradlab.SmoothAPLoss(0.1)).name == "the watched loss SmoothAPLoss"


def test_a_call_is_described_by_position_or_keyword_type_and_shape():
    assert adapters.describe_call((), {}) == "no argument"
    assert adapters.describe_call((torch.zeros(2, 3), 0.5), {"margin": 0.2, "w": torch.ones(2)}) \
        == "args[0]=Tensor[2, 3], args[1]=float, margin=float, w=Tensor[2]"  # fmt: skip
    # a container by its length and its items' kinds, None as itself ("args[0]=list,
    # args[1]=NoneType" said nothing of sentence-transformers' features)
    features = [{"input_ids": torch.zeros(2, 5)}, {"input_ids": torch.zeros(2, 5)}]
    assert adapters.describe_call((features, None), {}) == "args[0]=list of 2 dict, args[1]=None"
    assert adapters.describe_call(((torch.zeros(3), 1, "a", 2.0),), {"empty": []}) == (
        "args[0]=tuple of 4 Tensor[3], int, str, ..., empty=list of 0")
    # three kinds are all shown: nothing left out, no "..."
    assert adapters.describe_call(((torch.zeros(3), 1, "a"),), {}) == (
        "args[0]=tuple of 3 Tensor[3], int, str")


def test_an_unmet_need_without_a_reason_names_the_loss():
    adapter = adapters.LossAdapter("the watched loss mine", "embeddings", frozenset({"embeddings"}))
    assert adapter.why_not(frozenset({"embeddings", "loss"})) == (
        "needs the loss value; the watched loss mine does not provide it"
    )


def test_several_unknown_needs_are_all_named():
    adapter = adapters.adapt(gradlab.NTXentLoss(0.1))
    assert adapter.why_not(frozenset({"hessian", "fisher"})) == (
        "needs fisher, hessian, which the Monitor does not know"
    )


@pytest.mark.parametrize("need", ["embeddings", "embedding_grad", "smooth_ap_terms", "loss_kind"])
def test_a_score_loss_says_it_is_watched_on_scores_for_what_it_cannot_provide(need):
    adapter = adapters.adapt(gradlab.NTXentLoss(0.1))
    described = {
        "embeddings": "the embeddings",
        "embedding_grad": "the gradient backpropagated into the embeddings",
        "smooth_ap_terms": "SmoothAP's sigmoid block, computed from the embeddings",
        "loss_kind": "a watched SmoothAP loss (its analytic gradient is compared)",
    }[need]
    assert adapter.why_not(frozenset({need})) == (
        f"needs {described}; the loss is watched on a score matrix, not on embeddings"
    )


class _LogitsLoss(torch.nn.Module):
    """Made like open_clip's ClipLoss: its logits from features and a logit_scale."""

    def get_logits(self, images, texts, logit_scale):
        return logit_scale * images @ texts.T, logit_scale * texts @ images.T

    def forward(self, image_features, text_features, logit_scale):
        logits, _ = self.get_logits(image_features, text_features, logit_scale)
        return logits.logsumexp(dim=1).mean()


def test_a_loss_that_makes_its_logits_from_a_logit_scale_is_refused_naming_the_wrapper():
    with pytest.raises(GradlabError) as caught:
        adapters.adapt(_LogitsLoss())
    assert str(caught.value) == (
        "loss_fn _LogitsLoss makes its logits itself from the features and logit_scale, which "
        "the Monitor cannot read from its arguments; watch it wrapped: monitor.watch("
        "gradlab.integrations.open_clip.RecordingClipLoss(_LogitsLoss(...)))")  # fmt: skip


def test_get_logits_alone_or_a_recorder_is_not_refused():
    class NoScale(torch.nn.Module):  # get_logits, but no logit_scale argument
        def get_logits(self, x):
            return x

        def forward(self, embeddings, labels):
            return embeddings.sum()

    class Recorded(_LogitsLoss):  # it records its own logits: the Monitor can read them
        score_recorder = None

    class NoForward:  # a plain callable with get_logits
        def get_logits(self, x):
            return x

        def __call__(self, embeddings, labels):
            return embeddings.sum()

    class ScaleOnly(torch.nn.Module):  # a logit_scale argument, its logits not its own
        def forward(self, scores, positives, logit_scale=1.0):
            return (logit_scale * scores).sum()

    for loss in (NoScale(), Recorded(), NoForward(), ScaleOnly()):
        adapters.adapt(loss)  # no error
