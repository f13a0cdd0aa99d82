"""What a quantity returns is checked against what it declares before anything is logged.

A quantity of the user's own that returns an undeclared key (a typo), nothing (a forgotten
``return``) or a value of several elements is disabled with a warning that names the quantity,
the key and what is allowed (``strict=True`` raises it); two quantities that declare one key
are refused at construction (one's value would replace the other's in every record). Python
numbers are logged as they are.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import gradlab
from gradlab.errors import GradlabError
from gradlab.monitor import NEEDS, QUANTITIES, Loss, Monitor, Plot, Quantity, every, read_jsonl
from gradlab.monitor.quantity import check_declaration


class Returns(Quantity):
    """Returns what it is given (under ``returned``), whatever the step."""

    name = "returns"
    keys = ("returns_value",)

    def __init__(self, returned):
        super().__init__(every(1))
        self.returned = returned

    def compute(self, batch):
        return self.returned


def _step(tmp_path, quantity, strict=False):
    """One watched SmoothAP step logging the loss and ``quantity``; the record and warnings."""
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.randn(8, 4, generator=generator, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=[Loss(every(1)), quantity], strict=strict) as run:
            loss_fn = run.watch(gradlab.SmoothAPLoss(0.1))
            loss_fn(embeddings, torch.arange(8) % 4).backward()
            record = run.step()
    return record, [str(w.message) for w in caught], run


REFUSED = [
    (
        {"returns_valeu": torch.tensor(1.0)},
        "the returns quantity (Returns) returned the key 'returns_valeu', which it does not "
        "declare; its keys are ('returns_value',): add the key to Returns.keys, or fix its name",
    ),
    (
        None,
        "the returns quantity (Returns) returned None from compute(); compute returns a dict of "
        "its keys' values, one-element tensors or numbers ({} when it has nothing to log this "
        "step)",
    ),
    (
        {"returns_value": torch.ones(3)},
        "the returns quantity (Returns) returned a torch.float32 tensor of shape [3] under "
        "'returns_value'; a logged value is one real number: a 0-d tensor (or one of shape "
        "[1]), or a Python int, float or bool",
    ),
    (
        {"returns_value": torch.ones(1, 1)},
        "the returns quantity (Returns) returned a torch.float32 tensor of shape [1, 1] under "
        "'returns_value'; a logged value is one real number: a 0-d tensor (or one of shape "
        "[1]), or a Python int, float or bool",
    ),
    (
        {"returns_value": torch.tensor(1 + 2j)},
        "the returns quantity (Returns) returned a torch.complex64 tensor of shape [] under "
        "'returns_value'; a logged value is one real number: a 0-d tensor (or one of shape "
        "[1]), or a Python int, float or bool",
    ),
    (
        {"returns_value": "0.5"},
        "the returns quantity (Returns) returned '0.5' (str) under 'returns_value'; a logged "
        "value is one real number: a 0-d tensor (or one of shape [1]), or a Python int, float "
        "or bool",
    ),
    (
        {"returns_value": [0.5]},
        "the returns quantity (Returns) returned [0.5] (list) under 'returns_value'; a logged "
        "value is one real number: a 0-d tensor (or one of shape [1]), or a Python int, float "
        "or bool",
    ),
]


@pytest.mark.parametrize(("returned", "message"), REFUSED)
def test_a_value_against_the_declaration_disables_the_quantity_and_says_why(
    tmp_path, returned, message
):
    record, caught, run = _step(tmp_path, Returns(returned))
    assert set(record) == {"step", "loss", "disabled"}  # the other quantities are logged
    assert record["disabled"] == {"returns": f"step 0: {message}"}  # the log says so too
    assert list(run.disabled) == ["returns"]
    assert run.disabled["returns"] == message
    # the reason alone, not a traceback through gradlab's check
    assert caught == [
        f"gradlab.Monitor: step 0: quantity 'returns' is disabled: {message} (strict=True raises "
        "instead)"
    ]
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert records == [record]


@pytest.mark.parametrize(("returned", "message"), REFUSED[:3])
def test_strict_raises_what_the_value_breaks(tmp_path, returned, message):
    with pytest.raises(GradlabError) as raised:
        _step(tmp_path, Returns(returned), strict=True)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("value", "logged"),
    [
        (1.5, 1.5),
        (3, 3.0),
        (np.float32(0.25), 0.25),
        (torch.tensor([0.75]), 0.75),  # shape [1]
        (torch.tensor(2, dtype=torch.int64), 2.0),
        (True, 1.0),
        (torch.tensor(False), 0.0),
    ],
)
def test_one_element_tensors_and_python_numbers_are_logged(tmp_path, value, logged):
    record, caught, run = _step(tmp_path, Returns({"returns_value": value}))
    assert record["returns_value"] == logged
    assert type(record["returns_value"]) is float
    assert not run.disabled and not caught


def test_an_empty_dict_logs_nothing_for_that_quantity(tmp_path):
    record, caught, run = _step(tmp_path, Returns({}))
    assert set(record) == {"step", "loss"}
    assert not run.disabled and not caught


def test_two_quantities_that_declare_one_key_are_refused_at_construction(tmp_path):
    class Other(Quantity):
        name = "other"
        keys = ("other_value", "returns_value")

    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=[Returns({}), Other()])
    assert str(raised.value) == (
        "the returns and other quantities (Returns, Other) both declare the key "
        "'returns_value': one's value would replace the other's in every record; keep one of "
        "them, or rename the key of yours"
    )
    assert not any(tmp_path.iterdir())  # refused before anything is written


RESERVED = "disabled, dropped_records, dropped_steps, header, step"


@pytest.mark.parametrize("key", ["step", "header", "dropped_records", "dropped_steps", "disabled"])
def test_a_quantity_that_declares_a_key_the_logs_use_is_refused(tmp_path, key):
    class Own(Quantity):
        name = "own"
        keys = ("own_value", key)

    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=[Own()])
    assert str(raised.value) == (
        f"the own quantity (Own) declares the key {key!r}, which gradlab's logs use themselves "
        f"(reserved: {RESERVED}); rename that key"
    )


def test_a_key_named_header_would_have_made_the_log_unreadable(tmp_path):
    # Why "header" is reserved: read_jsonl reads {"header": ...} lines as headers.
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"header": {}}\n{"step": 0, "header": 1.0}\n')
    with pytest.warns(UserWarning, match="a header that is not a JSON object"):
        _, records = read_jsonl(path)
    assert records == []


class NoSuper(Quantity):
    name = "no_super"
    keys = ("no_super_value",)

    def __init__(self, k=3):  # forgets super().__init__(): no schedule
        self.k = k


def _declares(**declared):
    """A quantity class named Own with these class attributes (name "own" by default)."""
    return type("Own", (Quantity,), {"name": "own", **declared})


DECLARATIONS = [
    (
        NoSuper(),
        "the no_super quantity (NoSuper) has no schedule: its __init__ must call "
        "super().__init__(schedule) (schedule None: every step)",
    ),
    (
        _declares(name="")(),
        "a quantity's name must be a non-empty string; Own has name=''",
    ),
    (
        _declares(keys="own_mean")(),
        "the own quantity (Own) declares keys='own_mean'; keys is a tuple of non-empty strings "
        "(one key: ('own_mean',) with its comma)",
    ),
    (
        _declares(keys=("own_mean", 3))(),
        "the own quantity (Own) declares keys=('own_mean', 3); keys is a tuple of non-empty "
        "strings",
    ),
    (
        _declares(needs="scores")(),
        "the own quantity (Own) declares needs='scores'; needs is a frozenset of names from "
        "gradlab.monitor.NEEDS (one need: frozenset({'scores'}))",
    ),
    (
        _declares(optional_needs=frozenset({"scorez"}))(),
        "the own quantity (Own) needs 'scorez', which the Monitor does not provide; the needs "
        f"it provides: {', '.join(NEEDS)}",
    ),
    (
        _declares(keys=("own_mean",), plots=(Plot("own", "Own", "value", (("own_maen", "m"),)),))(),
        "the own quantity (Own) draws 'own_maen' in its plot family 'own', none of them a key "
        "it declares ('own_mean',): a series of an undeclared key is never logged, so never "
        "drawn",
    ),
    (
        _declares(keys=("own_mean",), plots=Plot("own", "Own", "value", (("own_mean", "m"),)))(),
        "the own quantity (Own) declares plots=Plot(family='own', title='Own', ylabel='value', "
        "series=(('own_mean', 'm'),), zero_based=False, resolution=0.0, reading=None, "
        "undefined=None); plots "
        "is a tuple of gradlab.monitor.Plot",
    ),
    (
        _declares(keys=("own_mean", ""))(),
        "the own quantity (Own) declares keys=('own_mean', ''); keys is a tuple of non-empty "
        "strings",
    ),
    (
        _declares(needs=frozenset("scores"))(),
        "the own quantity (Own) needs 'c', 'e', 'o', 'r', 's', which the Monitor does not "
        f"provide; the needs it provides: {', '.join(NEEDS)} (frozenset('scores') splits a "
        "string into its letters: write frozenset({'scores'}))",
    ),
    (
        _declares(keys=("own_mean",), input_free_keys=frozenset({"own_maen"}))(),
        "the own quantity (Own) declares input_free_keys=frozenset({'own_maen'}); "
        "input_free_keys is a frozenset of keys it declares in keys ('own_mean',)",
    ),
    (
        _declares(keys=("own_loss",), plots=(Plot("loss", "Mine", "loss",
                                                  (("own_loss", "mine"),)),))(),
        "the own quantity (Own) declares the plot family 'loss', which gradlab's Loss draws: "
        "gradlab plot would draw that one in its place; rename the family of yours",
    ),
]


@pytest.mark.parametrize(("quantity", "message"), DECLARATIONS)
def test_a_declaration_the_monitor_cannot_act_on_is_refused_at_construction(
    tmp_path, quantity, message
):
    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=[quantity])
    assert str(raised.value) == message
    assert not any(tmp_path.iterdir())


def test_two_quantities_that_share_a_plot_family_are_refused(tmp_path):
    first = _declares(keys=("own_a",), plots=(Plot("own", "A", "a", (("own_a", "a"),)),))
    second = _declares(name="other", keys=("own_b",),
                       plots=(Plot("own", "B", "b", (("own_b", "b"),)),))  # fmt: skip
    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=[first(), second()])
    assert str(raised.value) == (
        "the own and other quantities (Own, Own) both declare the plot family 'own': one "
        "figure file per family, so one would hide the other; rename the family of yours"
    )


def test_two_of_gradlabs_forms_of_one_quantity_are_told_to_pass_one(tmp_path):
    # "default every step, full's extras every 20th" built from the presets' classes: the
    # clash was told "give yours another name", though neither class is the user's
    from gradlab.monitor import PRESETS, GradientCounts, WeightedGradientCounts

    default = PRESETS["default"]
    quantities = ([q(every(1)) for q in default]
                  + [q(every(20)) for q in PRESETS["full"] if q not in default])  # fmt: skip
    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=quantities)
    assert str(raised.value) == (
        "quantities GradientCounts, WeightedGradientCounts are all named 'gradient_counts': "
        "forms of one quantity, whose keys overlap; pass one of them (each preset holds one: "
        "'default' GradientCounts, 'full' WeightedGradientCounts)")
    assert GradientCounts in default and WeightedGradientCounts in PRESETS["full"]
    assert set(GradientCounts.keys) <= set(WeightedGradientCounts.keys)  # the overlap said


def test_two_different_quantities_with_one_name_are_told_to_rename(tmp_path):
    mine = _declares(name="loss", keys=("loss_mine",))
    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=[Loss(), mine()])
    assert str(raised.value) == (
        "quantities Loss, Own are all named 'loss': a name is a quantity's in the run header, "
        "in not_logged and in disabled; give yours another name"
    )


def test_a_quantity_of_yours_named_as_one_of_gradlabs_is_told_to_rename(tmp_path):
    # alone, with no Loss beside it: its records and warnings would read as the loss's
    mine = _declares(name="loss", keys=("loss_mine",))
    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=[mine()])
    assert str(raised.value) == (
        "Own is named 'loss', the name of gradlab's Loss: the run header, not_logged, disabled "
        "and every warning would read as that quantity's; give yours another name"
    )
    assert not any(tmp_path.iterdir())


def test_a_subclass_of_one_of_gradlabs_quantities_may_keep_its_name(tmp_path):
    class Louder(Loss):  # the same quantity, told apart by nothing a reader needs
        pass

    assert Monitor(tmp_path, quantities=[Louder()]).quantities[0].name == Loss.name


def test_a_quantity_of_yours_without_a_name_is_told_to_name_it(tmp_path):
    nameless = type("Nameless", (Quantity,), {"keys": ("nameless_value",)})
    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=[nameless()])
    assert str(raised.value) == (
        f"Nameless keeps Quantity's placeholder name {Quantity.name!r}: set its name (class "
        "attribute name = '...'), which the run header, not_logged, disabled and every warning "
        "use for it"
    )


def test_every_quantity_gradlab_ships_passes_the_declaration_checks(tmp_path):
    for cls in QUANTITIES.values() if isinstance(QUANTITIES, dict) else QUANTITIES:
        check_declaration(cls())


FAMILY_NAME_RULE = (
    "a plot family's name must be letters, digits, '_', '-' or '.' (not first), and not "
    "overview: it names the figure file <family>.png; got "
)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        *[(dict(family=name), FAMILY_NAME_RULE + repr(name))
          for name in ("../escaped", "/tmp/abs", "", ".hidden", "my fam", "overview")],
        (dict(series=("own_value", "v")),
         "the plot family 'own': series must be one or more (key, legend label) pairs of "
         "non-empty strings, as ((\"my_key\", \"my label\"),); got ('own_value', 'v')"),
        (dict(series=()),
         "the plot family 'own': series must be one or more (key, legend label) pairs of "
         "non-empty strings, as ((\"my_key\", \"my label\"),); got ()"),
        (dict(title=5), "the plot family 'own': title must be a string; got 5"),
        (dict(zero_based="no"),
         "the plot family 'own': zero_based must be True or False; got 'no'"),
        (dict(resolution=float("nan")),
         "the plot family 'own': resolution must be a finite number at least 0; got nan"),
    ],
)
def test_a_plot_family_nothing_can_be_drawn_from_is_refused_where_it_is_declared(fields, message):
    declared = dict(family="own", title="Own", ylabel="value", series=(("own_value", "v"),))
    with pytest.raises(GradlabError) as raised:
        Plot(**{**declared, **fields})
    assert str(raised.value) == message


def test_a_subclass_of_a_gradlab_quantity_keeps_its_families(tmp_path):
    class MyLoss(Loss):
        name = "my_loss"

    Monitor(tmp_path, quantities=[MyLoss()]).close()  # the family gradlab draws: accepted


@pytest.mark.parametrize(
    ("value", "got"),
    [
        (10**400, "an int of 401 digits, too large for a float64"),
        (torch.empty((), device="meta"), "a torch.strided tensor on meta"),
        (torch.tensor([2.0]).to_sparse(), "a torch.sparse_coo tensor on cpu"),
        (torch.tensor([2.0], dtype=torch.float64).to_sparse(), "a torch.sparse_coo tensor on cpu"),
    ],
)
def test_a_value_that_cannot_be_logged_disables_the_quantity_instead_of_the_step(
    tmp_path, value, got
):
    record, _, run = _step(tmp_path, Returns({"returns_value": value}))
    assert set(record) == {"step", "loss", "disabled"}
    assert record["disabled"] == {"returns": f"step 0: {run.disabled['returns']}"}
    assert run.disabled["returns"] == (
        f"the returns quantity (Returns) returned {got} under 'returns_value'; a logged value "
        "is one real number: a 0-d tensor (or one of shape [1]), or a Python int, float or bool"
    )


class NeedsEmbeddings(Quantity):
    name = "needs_embeddings"
    needs = frozenset({"embeddings"})
    keys = ("needs_embeddings_mean",)

    def compute(self, batch):  # pragma: no cover - never asked
        raise AssertionError("computed although its need cannot be met")


def test_a_quantity_passed_by_name_that_the_loss_cannot_serve_is_said_at_watch(tmp_path):
    # it was left out with its reason in the header alone: 15 steps logged nothing of it
    with Monitor(tmp_path, quantities=[NeedsEmbeddings(), Loss()]) as run:
        with pytest.warns(UserWarning) as caught:
            watched = run.watch(gradlab.NTXentLoss(0.1))
        assert [str(w.message) for w in caught] == [
            "gradlab.Monitor: the needs_embeddings quantity, which you passed, cannot be logged "
            "for the watched loss NTXentLoss: needs the embeddings; the loss is watched on a "
            "score matrix, not on embeddings (monitor.not_logged and the run header keep the "
            "reason)"
        ]
        assert caught[0].filename == __file__  # at the user's watch()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once
            run.watch(gradlab.NTXentLoss(0.1))
        scores = torch.randn(4, 4, requires_grad=True)
        watched(scores, torch.eye(4, dtype=torch.bool)).backward()
        assert set(run.step()) == {"step", "loss"}


def test_a_quantity_passed_by_name_is_said_after_a_presets_left_out_quietly(tmp_path):
    from gradlab.monitor import Geometry

    # Geometry, a preset's, reads embeddings too: quiet, and the one after it still said
    with Monitor(tmp_path, quantities=[Geometry(), NeedsEmbeddings(), Loss()]) as run:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run.watch(gradlab.NTXentLoss(0.1))
    assert [(w.category, str(w.message).split(":")[1]) for w in caught] == [
        (UserWarning, " the needs_embeddings quantity, which you passed, cannot be logged for "
                      "the watched loss NTXentLoss")]  # fmt: skip


def test_a_presets_quantity_passed_alone_that_the_loss_cannot_serve_is_said(tmp_path):
    # quantities=[Anatomy(...)] on a loss without a score matrix logged nothing at all, with
    # the reason in the header alone: a preset's quantities are quiet only when another
    # quantity passed is logged
    from gradlab.monitor import Anatomy

    with Monitor(tmp_path, quantities=[Anatomy()]) as run:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run.watch(lambda embeddings, labels: embeddings.sum(), inputs="embeddings")
    said = [str(w.message) for w in caught]
    assert said == [
        f"gradlab.Monitor: the {name} quantity, which you passed, cannot be logged for the "
        f"watched loss <lambda>: {run.not_logged[name]} (monitor.not_logged and the run header "
        "keep the reason)" for name in ("anatomy",)]
    assert [w.filename for w in caught] == [__file__]


def test_a_quantity_no_watched_loss_serves_keeps_each_reason(tmp_path):
    with Monitor(tmp_path, preset="full") as run:
        run.attach(torch.nn.Linear(3, 2), torch.arange(4) % 2)
        run.watch(gradlab.NTXentLoss(0.1))
    assert run.not_logged["gradient_agreement"] == (
        "needs a watched SmoothAP loss (its analytic gradient is compared); attach() sees the "
        "embeddings only (use monitor.watch(loss_fn)); and needs the embeddings; the loss is "
        "watched on a score matrix, not on embeddings")


def test_a_preset_s_quantities_the_loss_cannot_serve_are_left_out_quietly(tmp_path):
    from gradlab.monitor import PRESETS

    with Monitor(tmp_path, quantities=[cls() for cls in PRESETS["full"]]) as run:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            run.watch(gradlab.NTXentLoss(0.1))
    assert "geometry" in run.not_logged  # left out, with its reason in the header


def test_every_value_is_checked_not_only_the_first(tmp_path):
    # a value after an accepted one (0-d float64, a one-element tensor, a Python number)
    for first in (torch.tensor(1.0, dtype=torch.float64), torch.tensor([2.0]), 3.0):
        returns = Returns({"returns_value": first, "returns_other": "bad"})
        returns.keys = ("returns_value", "returns_other")
        _, _, run = _step(tmp_path / str(len(list(tmp_path.iterdir()))), returns)
        assert run.disabled["returns"].startswith(
            "the returns quantity (Returns) returned 'bad' (str) under 'returns_other'"
        )


def test_python_numbers_are_logged_in_float64_and_the_quantitys_dict_is_left_alone(tmp_path):
    returned = {"returns_value": 0.1, "returns_other": 7}
    returns = Returns(returned)
    returns.keys = ("returns_value", "returns_other")
    record, caught, _ = _step(tmp_path, returns)
    assert record["returns_value"] == 0.1  # not float32's 0.10000000149011612
    assert record["returns_other"] == 7.0 and not caught
    assert [(key, type(value)) for key, value in returned.items()] == [
        ("returns_value", float), ("returns_other", int)]  # still the Python numbers


def test_a_quantity_whose_keys_are_a_list_may_grow_it(tmp_path):
    returns = Returns({"returns_value": 1.0})
    returns.keys = ["returns_value"]  # a list: read as it is at each step
    generator = torch.Generator().manual_seed(0)
    with Monitor(tmp_path, quantities=[returns]) as run:
        loss_fn = run.watch(gradlab.SmoothAPLoss(0.1))
        for step in range(2):
            if step == 1:
                returns.keys.append("returns_more")
                returns.returned = {"returns_value": 1.0, "returns_more": 2.0}
            embeddings = torch.randn(8, 4, generator=generator, requires_grad=True)
            loss_fn(embeddings, torch.arange(8) % 4).backward()
            record = run.step()
    assert record == {"step": 1, "returns_value": 1.0, "returns_more": 2.0}
    assert not run.disabled


def test_a_quantized_value_is_named_as_one(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: quantize_per_tensor is deprecated
        value = torch.quantize_per_tensor(torch.tensor([1.0]), 0.1, 0, torch.quint8)
    _, _, run = _step(tmp_path, Returns({"returns_value": value}))
    assert run.disabled["returns"].startswith(
        "the returns quantity (Returns) returned a torch.strided tensor on cpu (quantized) under "
    )


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        (dict(needs=5), "the own quantity (Own) declares needs=5; needs is a frozenset of names "
                        "from gradlab.monitor.NEEDS"),
        (dict(keys=("own_mean",), input_free_keys=5),
         "the own quantity (Own) declares input_free_keys=5; input_free_keys is a frozenset of "
         "keys it declares in keys ('own_mean',)"),
        (dict(keys=("own_mean",), plots=(Plot("own", "Own", "v", (("own_a", "a"),
                                                                   ("own_b", "b"))),)),
         "the own quantity (Own) draws 'own_a', 'own_b' in its plot family 'own', none of them "
         "a key it declares ('own_mean',): a series of an undeclared key is never logged, so "
         "never drawn"),
        # one series right and one misspelt: the misspelt key was accepted, never drawn
        (dict(keys=("own_a", "own_b"), plots=(Plot("own", "Own", "v", (("own_a", "a"),
                                                                        ("own_bb", "b"))),)),
         "the own quantity (Own) draws 'own_bb' in its plot family 'own', not a key it "
         "declares ('own_a', 'own_b'): a series of an undeclared key is never logged, so never "
         "drawn (a typo?)"),
        (dict(keys=("own_a",), plots=(Plot("own", "Own", "v", (
            ("own_a", "a"), ("own_x", "x"), ("own_y", "y"))),)),
         "the own quantity (Own) draws 'own_x', 'own_y' in its plot family 'own', not a key it "
         "declares ('own_a',): a series of an undeclared key is never logged, so never drawn "
         "(a typo?)"),
    ],
)
def test_more_declarations_the_monitor_cannot_act_on(tmp_path, declared, message):
    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=[_declares(**declared)()])
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(series=(("own_value", "v", "extra"),)),
         "the plot family 'own': series must be one or more (key, legend label) pairs of "
         "non-empty strings, as ((\"my_key\", \"my label\"),); got (('own_value', 'v', 'extra'),)"),
        (dict(series=(("own_value", 3),)),
         "the plot family 'own': series must be one or more (key, legend label) pairs of "
         "non-empty strings, as ((\"my_key\", \"my label\"),); got (('own_value', 3),)"),
        (dict(resolution="x"),
         "the plot family 'own': resolution must be a finite number at least 0; got 'x'"),
    ],
)
def test_more_plot_families_that_cannot_be_drawn(fields, message):
    declared = dict(family="own", title="Own", ylabel="value", series=(("own_value", "v"),))
    with pytest.raises(GradlabError) as raised:
        Plot(**{**declared, **fields})
    assert str(raised.value) == message


def test_a_header_family_reads_back_with_the_defaults_of_what_it_leaves_out():
    recorded = {"family": "own", "title": "Own", "ylabel": "value", "series": [["own_v", "v"]]}
    assert Plot.from_header(recorded) == Plot("own", "Own", "value", (("own_v", "v"),))
    full = Plot("own", "Own", "value", (("own_v", "v"),), zero_based=True, resolution=0.5,
                reading="What the own value measures, in a sentence of eight words.",
                undefined="undefined for a batch of one class")
    assert Plot.from_header(full.as_header()) == full
    assert "undefined" not in Plot("own", "Own", "value", (("own_v", "v"),)).as_header()
    assert Plot.from_header({**recorded, "zero_based": "yes"}) is None  # not a bool: refused


def test_a_key_declared_twice_by_one_quantity_is_refused(tmp_path):
    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=[_declares(keys=("own_mean", "own_mean"))()])
    assert str(raised.value) == "the own quantity (Own) declares the key 'own_mean' twice"


@pytest.mark.parametrize("key", ["loss", "geometry_alignment", "margin_mean",
                                 "gradient_count_mean_weighted"])  # an option's key too
def test_a_key_of_gradlab_s_own_quantities_is_refused_even_when_they_are_not_logged(tmp_path,
                                                                                   key):
    # the key was logged, and gradlab plot drew it as gradlab's (titled "Loss", ...)
    class Mine(Quantity):
        name = "mine"
        keys = (key,)

    owner = {"loss": "Loss", "geometry_alignment": "Geometry", "margin_mean": "Margins",
             "gradient_count_mean_weighted": "GradientCounts"}[key]
    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=[Mine(every(1))])
    assert str(raised.value) == (
        f"the mine quantity (Mine) declares the key {key!r}, which gradlab's {owner} logs: "
        "gradlab plot would draw yours as that one; rename the key of yours"
    )


def test_a_subclass_of_gradlab_s_quantity_keeps_its_keys(tmp_path):
    class Scaled(Loss):
        def compute(self, batch):
            return {"loss": super().compute(batch)["loss"] * 2}

    embeddings = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
    with Monitor(tmp_path, quantities=[Scaled(every(1))]) as run:
        loss = run.watch(gradlab.SmoothAPLoss(0.1))(embeddings, torch.arange(8) % 4)
        record = run.step()
    assert record["loss"] == pytest.approx(2 * loss.item(), rel=1e-6)


def test_values_on_another_device_are_moved_to_the_step_s_in_a_copy():
    from gradlab.monitor.quantity import check_values

    # a CPU scalar of a step on another device (here meta) is moved there; the quantity's own
    # dict is left as it returned it, and a float64 0-d value on the device is taken as it is
    values = {"returns_value": torch.tensor(0.5)}
    checked = check_values(Returns(values), values, torch.device("meta"))
    assert checked is not values and checked["returns_value"].is_meta

    class Two(Quantity):
        name, keys = "two", ("two_a", "two_b")

    both = {"two_a": torch.tensor(0.5), "two_b": torch.tensor(1.5)}  # both moved, in one copy
    assert all(v.is_meta for v in check_values(Two(), both, torch.device("meta")).values())
    assert values["returns_value"].device.type == "cpu"
    same = {"returns_value": torch.tensor(0.5, dtype=torch.float64)}
    assert check_values(Returns(same), same, torch.device("cpu")) is same


def test_a_misspelt_series_in_plots_set_by_init_is_refused_too(tmp_path):
    # plots set on the instance read as the base class's (gradlab's): the typo was accepted
    class Own(Quantity):
        name, keys = "own", ("own_a", "own_b")

        def __init__(self):
            super().__init__()
            self.plots = (Plot("own", "Own", "v", (("own_a", "a"), ("own_bb", "b"))),)

        def compute(self, batch):
            return {}

    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=[Own()])
    assert str(raised.value) == (
        "the own quantity (Own) draws 'own_bb' in its plot family 'own', not a key it declares "
        "('own_a', 'own_b'): a series of an undeclared key is never logged, so never drawn "
        "(a typo?)")


def test_a_subclass_that_adds_a_family_to_gradlabs_keeps_gradlabs_families(tmp_path):
    # gradlab's families draw keys only a variant logs (the weighted counts): extended at class
    # level, they were refused as the subclass's own; the added family is checked
    from gradlab.monitor import GradientCounts

    class More(GradientCounts):
        plots = (*GradientCounts.plots, Plot("more", "More", "v",
                                             (("gradient_count_mean", "mean"),)))

    Monitor(tmp_path / "ok", quantities=[More()]).close()

    class Misspelt(GradientCounts):
        plots = (*GradientCounts.plots, Plot("more", "More", "v", (("gradient_count_mea", "m"),)))

    with pytest.raises(GradlabError, match=r"draws 'gradient_count_mea' in its plot family "):
        Monitor(tmp_path / "bad", quantities=[Misspelt()])


@pytest.mark.parametrize("field", ["reading", "undefined"])
@pytest.mark.parametrize("text", [5, "", "   ", ("How far apart.",), b"How far apart."])
def test_a_plot_text_that_is_no_sentence_is_refused_where_it_is_declared(field, text):
    with pytest.raises(GradlabError) as raised:
        Plot("own", "Own", "value", (("own_value", "v"),), **{field: text})
    assert str(raised.value) == (f"the plot family 'own': {field} must be a sentence (a "
                                 f"non-empty string) or None; got {text!r}")  # fmt: skip


class ReadSpread(Quantity):
    """The spread of the batch's scores, drawn in two families: one says what to read."""

    name = "own_read_spread"
    needs = frozenset({"scores"})
    keys = ("own_read_spread",)
    plots = (
        Plot("own_read_spread", "Spread of the scores", "std", (("own_read_spread", "std"),),
             reading="How far apart the batch's scores lie: near 0, no candidate stands out."),
        Plot("own_read_spread_bare", "Spread again", "std", (("own_read_spread", "std"),)),
    )  # fmt: skip

    def compute(self, batch):
        return {"own_read_spread": batch.scores.std()}


def test_a_plot_reading_travels_with_its_family_through_the_run_header(tmp_path):
    # what to read from a figure is declared with the figure: gradlab plot reads the families
    # of a quantity of one's own from the header, without the class
    with Monitor(tmp_path, quantities=[ReadSpread()]) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
        monitor.step()
    headers, _ = read_jsonl(tmp_path / "metrics.jsonl")
    read, bare = headers[0]["plots"]
    assert read["reading"] == ("How far apart the batch's scores lie: near 0, no candidate "
                               "stands out.")  # fmt: skip
    assert "reading" not in bare  # a family without one is recorded as before it existed
    assert [Plot.from_header(entry) for entry in (read, bare)] == list(ReadSpread.plots)
    assert Plot.from_header(bare).reading is None


def test_every_family_of_gradlab_s_quantities_says_what_to_read_from_it():
    families = [plot for cls in (QUANTITIES.values() if isinstance(QUANTITIES, dict)
                                 else QUANTITIES) for plot in cls.plots]  # fmt: skip
    assert len(families) >= 20
    for plot in families:
        assert isinstance(plot.reading, str) and plot.reading.endswith("."), plot.family
        assert len(plot.reading.split()) >= 8, plot.family  # a sentence, not a label


class _InPlace(Quantity):
    """A quantity of one's own that changes a shared tensor in place (a typo for ``/``)."""

    name = "in_place"
    keys = ("in_place_mean",)
    plots = (Plot("in_place", "In place", "value", (("in_place_mean", "mean"),)),)

    def __init__(self, schedule, need: str) -> None:
        super().__init__(schedule)
        self.needs = frozenset({need})
        self.need = need

    def compute(self, batch):
        return {"in_place_mean": getattr(batch, self.need).mul_(0.5).mean()}


@pytest.mark.parametrize(("need", "loss", "said"), [
    ("embeddings", "embeddings", "embeddings"),
    ("scores", "scores", "scores"),  # a watched score matrix, named as the user knows it
])  # fmt: skip
def test_a_quantity_that_changes_a_shared_tensor_in_place_is_named_and_never_reaches_gradlabs(
    tmp_path, need, loss, said
):
    # halving batch.scores in place halved the margins logged after it, without a word
    generator = torch.Generator().manual_seed(0)
    if loss == "embeddings":
        loss_fn, first = gradlab.SmoothAPLoss(0.01), torch.randn(16, 8, generator=generator)
        second = torch.arange(4).repeat_interleave(4)
    else:
        loss_fn, first = gradlab.NTXentLoss(0.1), torch.randn(6, 6, generator=generator)
        second = torch.eye(6, dtype=torch.bool)
    records = {}
    for name, own in (("alone", []), ("mine first", [_InPlace(every(1), need)])):
        with Monitor(tmp_path / name.replace(" ", "_"),
                     quantities=[*own, gradlab.monitor.Margins(every(1))]) as monitor:
            watched = monitor.watch(loss_fn)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                watched(first.clone().requires_grad_(), second).backward()
                records[name] = monitor.step()
        said_here = [str(w.message) for w in caught if "in place" in str(w.message)]
        if own:
            assert said_here == [
                f"gradlab.Monitor: step 0: quantity 'in_place' is disabled, refused in "
                f"compute(): its compute() changed the step's {said} in place, which the "
                "quantities computed after it read; compute from a copy (x.clone()) or out of "
                "place (x / 2, not x.div_(2)) (strict=True raises instead)"]
            assert set(monitor.disabled) == {"in_place"} and "in_place_mean" not in records[name]
    margins = [key for key in records["alone"] if key.startswith("margin_")]
    assert margins and all(records["mine first"][key] == records["alone"][key] for key in margins)
    # the record's order kept, with the note of the quantity disabled
    assert list(records["mine first"]) == [*records["alone"], "disabled"]


def test_a_quantity_of_ones_own_listed_first_keeps_its_place_in_the_record(tmp_path):
    # gradlab's quantities compute first; the record still follows the order given
    class Mean(Quantity):
        name = "score_mean"
        keys = ("score_mean",)
        needs = frozenset({"scores"})
        plots = (Plot("score_mean", "Mean score", "score", (("score_mean", "mean"),)),)

        def compute(self, batch):
            return {"score_mean": batch.scores.mean()}

    scores = torch.randn(6, 6, generator=torch.Generator().manual_seed(1))
    with Monitor(tmp_path / "run", quantities=[Mean(every(1)), Loss(every(1))]) as monitor:
        watched = monitor.watch(gradlab.NTXentLoss(0.1))
        watched(scores.clone().requires_grad_(), torch.eye(6, dtype=torch.bool)).backward()
        record = monitor.step()
    assert list(record) == ["step", "score_mean", "loss"]
    assert record["score_mean"] == pytest.approx(float(scores.double().mean()), abs=1e-6)


def test_a_quantity_that_changes_two_shared_tensors_in_place_names_both(tmp_path):
    class TwoInPlace(_InPlace):
        def compute(self, batch):
            batch.labels.add_(0)
            return {"in_place_mean": batch.embeddings.mul_(0.5).mean()}

    quantity = TwoInPlace(every(1), "embeddings")
    with Monitor(tmp_path, quantities=[quantity]) as monitor:
        watched = monitor.watch(gradlab.SmoothAPLoss(0.01))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            watched(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
            monitor.step()
    said = [str(w.message) for w in caught if "in place" in str(w.message)]
    assert len(said) == 1
    assert "its compute() changed the step's embeddings and labels in place" in said[0]
