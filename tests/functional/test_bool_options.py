"""Every True/False option of gradlab.functional refuses what is no bool, by name, before any
work: a truthy string (``include_query="no"``, ``validate="no"``) switched the option on in
silence (``smooth_ap_loss(..., include_query="no")`` ranked each query as its own positive)."""

import inspect

import pytest
import torch

import gradlab.functional as F
from gradlab.errors import GradlabError

SCORES = torch.randn(6, 6, generator=torch.Generator().manual_seed(0))
POSITIVES = torch.eye(6, dtype=torch.bool) | torch.eye(6, dtype=torch.bool).roll(1, 1)
EMBEDDINGS = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))
LABELS = torch.tensor([0, 0, 1, 1, 2, 2])

CALLS = {  # a valid call of each public function that has a True/False option
    "blackbox_ap_loss": lambda **o: F.blackbox_ap_loss(EMBEDDINGS, LABELS, **o),
    "cross_modal_layout": lambda **o: F.cross_modal_layout(EMBEDDINGS, EMBEDDINGS, POSITIVES,
                                                           **o),
    "effective_rank": lambda **o: F.effective_rank(EMBEDDINGS, **o),
    "expected_operating_region_proportion": lambda **o: F.expected_operating_region_proportion(
        0.05, 6, **o),
    "fappy_loss": lambda **o: F.fappy_loss(EMBEDDINGS, LABELS, **o),
    "fastap": lambda **o: F.fastap(EMBEDDINGS, LABELS, **o),
    "fastap_loss": lambda **o: F.fastap_loss(EMBEDDINGS, LABELS, **o),
    "gradient_counts": lambda **o: F.gradient_counts(SCORES, POSITIVES, **o),
    "in_batch_decomposition": lambda **o: F.in_batch_decomposition(EMBEDDINGS, LABELS, 0.1, **o),
    "in_batch_layout": lambda **o: F.in_batch_layout(EMBEDDINGS, LABELS, **o),
    "in_batch_retrieval": lambda **o: F.in_batch_retrieval(EMBEDDINGS, LABELS, **o),
    "max_violation_triplet_loss": lambda **o: F.max_violation_triplet_loss(SCORES, POSITIVES,
                                                                           **o),
    "nt_xent_loss": lambda **o: F.nt_xent_loss(SCORES, POSITIVES, **o),
    "operating_region_proportion": lambda **o: F.operating_region_proportion(SCORES, **o),
    "sigmoid_pair_loss": lambda **o: F.sigmoid_pair_loss(SCORES, POSITIVES, **o),
    "smooth_ap": lambda **o: F.smooth_ap(SCORES, POSITIVES, **o),
    "smooth_ap_loss": lambda **o: F.smooth_ap_loss(EMBEDDINGS, LABELS, **o),
}


def bool_options(function) -> list[str]:
    """The parameters of ``function`` whose default is True or False."""
    return [parameter.name for parameter in inspect.signature(function).parameters.values()
            if isinstance(parameter.default, bool)]  # fmt: skip


def public_functions_with_bool_options() -> dict[str, list[str]]:
    found = {}
    for name in F.__all__:
        member = getattr(F, name)
        if inspect.isfunction(member) and bool_options(member):
            found[name] = bool_options(member)
    return found


def test_the_table_calls_every_public_function_that_has_a_bool_option():
    assert sorted(public_functions_with_bool_options()) == sorted(CALLS)


CASES = [(name, option) for name, options in sorted(public_functions_with_bool_options().items())
         for option in options]  # fmt: skip


@pytest.mark.parametrize(("name", "option"), CASES, ids=[f"{n}-{o}" for n, o in CASES])
@pytest.mark.parametrize("value", ["no", 1, None])
def test_an_option_that_is_no_bool_is_refused_by_name(name, option, value):
    CALLS[name]()  # the call is valid as it is
    with pytest.raises(GradlabError, match=rf"^{option} must be True or False; "
                                           rf"got {value!r}$"):  # fmt: skip
        CALLS[name](**{option: value})
