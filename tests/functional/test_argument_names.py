"""The glossary's one name per concept (docs/glossary.md), read from the public signatures.

The glossary gives a score matrix the name ``scores`` and a relevance mask ``positives`` ("never
called ``relevant`` or ``relevance``"): no public function of ``gradlab.functional`` and no loss
of ``gradlab`` takes one of those concepts under another name.
"""

from __future__ import annotations

import inspect

import pytest

import gradlab
import gradlab.functional

SYNONYMS = {
    "similarities": "scores",
    "similarity_matrix": "scores",
    "score_matrix": "scores",
    "sims": "scores",
    "relevant": "positives",
    "relevance": "positives",
    "positive_mask": "positives",
}
"""A name the glossary does not use -> the glossary's name of that concept."""


def _public_callables():
    for module in (gradlab.functional, gradlab):
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value):
                if callable(getattr(value, "forward", None)):
                    yield f"{module.__name__}.{name}.forward", value.forward
                yield f"{module.__name__}.{name}", value.__init__
            elif callable(value):
                yield f"{module.__name__}.{name}", value


@pytest.mark.parametrize(("qualified", "function"), list(_public_callables()),
                         ids=lambda item: item if isinstance(item, str) else "")  # fmt: skip
def test_public_signatures_use_the_glossary_s_names(qualified, function):
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return
    misnamed = {name: SYNONYMS[name] for name in parameters if name in SYNONYMS}
    assert not misnamed, f"{qualified} takes {misnamed} (name -> the glossary's)"


@pytest.mark.parametrize(("qualified", "function"), list(_public_callables()),
                         ids=lambda item: item if isinstance(item, str) else "")  # fmt: skip
def test_candidate_mask_is_keyword_only_everywhere(qualified, function):
    # The glossary: candidate_mask is optional and passed by keyword, in every signature (a
    # positional mask lands on tau in smooth_ap, on score_grad in suspect_summary).
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return
    mask = parameters.get("candidate_mask")
    if mask is not None:
        assert mask.kind is inspect.Parameter.KEYWORD_ONLY, f"{qualified}: {mask.kind.name}"
