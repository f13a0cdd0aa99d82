"""Under ``torch.autocast`` the losses compute in their inputs' dtype: a float32 call under CPU
autocast (bfloat16) gives the value and the gradient of the same call without it, bit for bit.
Without the rule autocast runs the cosine products in bfloat16 (FastAP's and Blackbox AP's
gradients then point elsewhere)."""

from __future__ import annotations

import sys

import pytest
import torch

import gradlab.functional as F
from gradlab.functional.precision import gradient_overflow_message, outside_autocast

GENERATOR_SEED = 11
LABELS = torch.arange(24) % 6
EYE = torch.eye(10, dtype=torch.bool)


def _embeddings() -> torch.Tensor:
    return torch.randn(24, 16, generator=torch.Generator().manual_seed(GENERATOR_SEED))


def _scores() -> torch.Tensor:
    return torch.rand(10, 10, generator=torch.Generator().manual_seed(GENERATOR_SEED))


def _cosine(embeddings: torch.Tensor) -> torch.Tensor:
    unit = embeddings / embeddings.norm(dim=1, keepdim=True)
    return unit @ unit.T  # under autocast: bfloat16, as a model's would be


CALLS = {  # (input, the call whose value is summed and differentiated)
    "smooth_ap": (_scores, lambda s: F.smooth_ap(s, EYE, 0.05)),
    "smooth_ap_loss": (_embeddings, lambda e: F.smooth_ap_loss(e, LABELS, tau=0.05)),
    "fastap": (_embeddings, lambda e: F.fastap(e, LABELS, 20)),
    "fastap_loss": (_embeddings, lambda e: F.fastap_loss(e, LABELS, 20)),
    "fappy_loss": (_embeddings, lambda e: F.fappy_loss(e, LABELS, 0.05)),
    "false_positive_probability": (
        _scores, lambda s: F.false_positive_probability(2 * s - 1, torch.arange(10) % 3, 0.25)[0],
    ),
    "blackbox_ap": (_scores, lambda s: F.blackbox_ap(s, EYE)),
    "blackbox_ap_loss": (_embeddings, lambda e: F.blackbox_ap_loss(e, LABELS)),
    "nt_xent_loss": (_scores, lambda s: F.nt_xent_loss(s, EYE, 0.1)),
    "max_violation_triplet_loss": (_scores, lambda s: F.max_violation_triplet_loss(s, EYE)),
    "sigmoid_pair_loss": (_scores, lambda s: F.sigmoid_pair_loss(s, EYE)),
}


def _run(name: str, autocast: bool):
    make, call = CALLS[name]
    leaf = make().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        value = call(leaf)
    value = value.nansum() if value.ndim else value  # per-query APs: NaN for a query without
    value.backward()
    return value, leaf.grad


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_float32_call_under_autocast_is_the_call_without_it(name):
    plain, plain_grad = _run(name, autocast=False)
    value, grad = _run(name, autocast=True)
    assert value.dtype == grad.dtype == torch.float32
    assert torch.equal(value, plain) and torch.equal(grad, plain_grad)


def test_a_product_under_autocast_is_bfloat16_so_the_tests_above_can_fail():
    embeddings = _embeddings()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert _cosine(embeddings).dtype == torch.bfloat16
        assert outside_autocast(_cosine)(embeddings).dtype == torch.float32


def test_outside_autocast_keeps_the_function_and_passes_calls_without_a_tensor():
    def noted(value: int, *, twice: bool = False) -> int:
        return 2 * value if twice else value

    wrapped = outside_autocast(noted)
    assert wrapped.__name__ == "noted" and wrapped.__wrapped__ is noted
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert wrapped(3, twice=True) == 6
        meta = torch.empty(2, 2, device="meta")  # a device autocast does not know
        assert outside_autocast(lambda t: t @ t)(meta).dtype == torch.float32


@pytest.mark.filterwarnings("ignore:torch.is_autocast_cpu_enabled:DeprecationWarning")  # 2.4+
def test_torch_before_2_4_without_a_device_argument_is_read_through_its_own_calls(monkeypatch):
    # torch.is_autocast_enabled takes a device type from torch 2.4 on; on older torch (the
    # package allows 2.0) the call raised TypeError in every loss, autocast or not
    real = torch.is_autocast_enabled

    def before_2_4(*device_type: str) -> bool:  # the old signature, as gradlab meets it
        caller = sys._getframe(1).f_globals.get("__name__")  # torch's own calls still work
        if device_type and caller == "gradlab.functional.precision":
            raise TypeError("is_autocast_enabled() takes 0 positional arguments but 1 was given")
        return real(*device_type)

    monkeypatch.setattr(torch, "is_autocast_enabled", before_2_4)
    _, plain_grad = _run("fastap_loss", autocast=False)
    value, grad = _run("fastap_loss", autocast=True)  # the CPU's state from its own call
    assert value.dtype == torch.float32 and torch.equal(grad, plain_grad)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert outside_autocast(_cosine)(_embeddings()).dtype == torch.float32
        assert outside_autocast(lambda t: t + 1)(torch.empty(1, device="meta")).numel() == 1


@pytest.mark.filterwarnings("ignore:torch.is_autocast_cpu_enabled:DeprecationWarning")  # 2.4+
def test_before_2_4_cudas_state_is_not_read_for_a_device_without_autocast(monkeypatch):
    # torch < 2.4 answers for CUDA when asked without a device: with CUDA's autocast on, a
    # tensor of another device (meta here) must not be switched (torch.autocast knows no
    # "meta": switching would raise)
    real = torch.is_autocast_enabled

    def before_2_4_with_cuda_on(*device_type: str) -> bool:
        if sys._getframe(1).f_globals.get("__name__") == "gradlab.functional.precision":
            if device_type:
                raise TypeError("is_autocast_enabled() takes 0 positional arguments")
            return True  # CUDA's autocast, on
        return real(*device_type)

    monkeypatch.setattr(torch, "is_autocast_enabled", before_2_4_with_cuda_on)
    meta = torch.empty(2, 2, device="meta")
    assert outside_autocast(lambda t: t @ t)(meta).shape == (2, 2)


@pytest.mark.parametrize(("dtype", "largest"), [(torch.float16, "65504"),
                                                 (torch.bfloat16, "3.38953e+38")])
def test_the_gradient_overflow_refusal_names_the_scores_dtype_and_its_largest_value(dtype,
                                                                                    largest):
    assert gradient_overflow_message(dtype, "it can reach 1e+05", "pass float32") == (
        f"scores must keep the gradient within {dtype}'s largest value {largest} (dL/dS is "
        "computed in float32 and returned in the scores' dtype); it can reach 1e+05; pass "
        "float32")


def test_a_checked_method_names_the_class_of_the_object_called_without_self():
    from gradlab.errors import CallFormError
    from gradlab.functional.precision import call_form_checked

    class Base:
        def __init__(self, width: float = 1.0) -> None:
            self.width = width

        def scale(self, x, *, factor=2.0):
            return x * factor * self.width

    Base.__init__ = call_form_checked(Base.__init__, method=True)
    Base.scale = call_form_checked(Base.scale, method=True)

    class Child(Base):  # inherits both: named by its own class
        pass

    assert Child(3.0).scale(1.0, factor=0.5) == 1.5  # a call that fits runs as before
    with pytest.raises(CallFormError, match=r"^Child\.scale\(x, \*, factor=2\.0\): got an "
                       r"unexpected keyword argument 'factr'$"):
        Child().scale(1.0, factr=3.0)
    with pytest.raises(CallFormError, match=r"^Child\(width=1\.0\): got an unexpected keyword "
                       r"argument 'widht'$"):
        Child(widht=2.0)
    with pytest.raises(CallFormError, match=r"^Base\.scale\(x, \*, factor=2\.0\): too many "
                       r"positional arguments; factor is keyword-only: pass it by name"):
        Base().scale(1.0, 2.0)
    assert Base.scale.refuses_misfit_calls is True  # what the loss base class looks for

    def plain(x, *, factor=2.0):  # a function: no class named, even with a first argument
        return x * factor

    with pytest.raises(CallFormError, match=r"^plain\(x, \*, factor=2\.0\): got an unexpected "
                       r"keyword argument 'factr'$"):
        call_form_checked(plain)(Child(), factr=1.0)
