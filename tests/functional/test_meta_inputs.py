"""A "meta" tensor (a shape without values) given to a public function of gradlab.functional:
the package's error naming the argument, never torch's "Cannot copy out of meta tensor" or
"Tensor.item() cannot be called on meta tensors" from inside the computation."""

import pytest
import torch

import gradlab.functional as F
from gradlab.errors import GradlabError

M = 6
SCORES = torch.empty(M, M, device="meta")
POSITIVES = torch.eye(M, dtype=torch.bool, device="meta")
EMBEDDINGS = torch.empty(M, 4, device="meta")
LABELS = torch.zeros(M, dtype=torch.long, device="meta")

CALLS = {
    "smooth_ap": lambda: F.smooth_ap(SCORES, POSITIVES),
    "smooth_ap_loss": lambda: F.smooth_ap_loss(EMBEDDINGS, LABELS),
    "nt_xent_loss": lambda: F.nt_xent_loss(SCORES, POSITIVES),
    "max_violation_triplet_loss": lambda: F.max_violation_triplet_loss(SCORES, POSITIVES),
    "operating_region_proportion": lambda: F.operating_region_proportion(SCORES),
    "gradient_counts": lambda: F.gradient_counts(SCORES, POSITIVES),
    "tie_aware_ap": lambda: F.tie_aware_ap(SCORES, POSITIVES),
    "tie_aware_ndcg": lambda: F.tie_aware_ndcg(SCORES, POSITIVES.float()),
    "fastap_loss": lambda: F.fastap_loss(EMBEDDINGS, LABELS),
    "blackbox_ap_loss": lambda: F.blackbox_ap_loss(EMBEDDINGS, LABELS),
    "in_batch_layout": lambda: F.in_batch_layout(EMBEDDINGS, LABELS),
    "retrieval_report": lambda: F.retrieval_report(SCORES, POSITIVES),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_a_meta_tensor_is_refused_with_the_package_s_error(call):
    with pytest.raises(GradlabError, match=r"is a meta tensor \(a shape without values\)"):
        call()


COUNTS = torch.ones(M, device="meta")
VALUE_READERS = {  # the value checks of these read their inputs: torch's errors, not gradlab's
    "discount_gap": lambda: F.discount_gap(COUNTS, COUNTS),
    "discount_rate": lambda: F.discount_rate(COUNTS, COUNTS),
    "discount_rate_log": lambda: F.discount_rate(COUNTS, COUNTS, "log"),
    "logarithmic_integral": lambda: F.logarithmic_integral(COUNTS),
    "relaxed_tie_aware_ap": lambda: F.relaxed_tie_aware_ap(SCORES, SCORES),
    "relaxed_tie_aware_dcg": lambda: F.relaxed_tie_aware_dcg(SCORES.unsqueeze(-1), COUNTS[:1]),
    "soft_histogram": lambda: F.soft_histogram(SCORES, POSITIVES.long(), 3, 2),
}


@pytest.mark.parametrize("call", VALUE_READERS.values(), ids=VALUE_READERS.keys())
def test_a_meta_tensor_given_to_a_value_check_is_refused_with_the_package_s_error(call):
    with pytest.raises(GradlabError, match=r"is a meta tensor \(a shape without values\)"):
        call()
