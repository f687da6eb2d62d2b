"""Interop with the field's anchors: our events as dp-accounting DpEvents (re-accounted by its own
PLD and RDP accountants: the same epsilons), DpEvent dicts, Opacus accountant states, and
TF-Privacy's DP-SGD description (its q, steps and published epsilons)."""

from __future__ import annotations

import json
import math
from collections import OrderedDict

import numpy as np
import pytest
from dp_accounting import NeighboringRelation
from dp_accounting import dp_event as de
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS, RdpAccountant
from hypothesis import given
from hypothesis import strategies as st

from uldp.accountants.events import Composed, Group, KnownParticipation, ParallelSilos, SubsampledGaussian
from uldp.accountants.orders import TF_PRIVACY_ORDERS
from uldp.accountants.registry import account_event
from uldp.accountants.statements.dp_events import (
    dp_event_from_dict,
    dp_event_to_dict,
    silo_dp_events,
    to_dp_event,
)
from uldp.accountants.statements.external import DpSgdDescription, opacus_events, read_opacus_file
from uldp.accountants.tight.pld import _default_discretization
from uldp.errors import DataError, InvalidParameter

DELTA = 1e-5
# Mechanisms cheap enough for dp-accounting's own accountants (each well under a second).
RUNS = [
    SubsampledGaussian(1.1, 256 / 60000, 1000),  # MNIST's rate
    SubsampledGaussian(5.0, 0.01, 10_000),  # Fig. 2's sigma and q
    SubsampledGaussian(0.7, 0.3, 20),
    SubsampledGaussian(2.0, 1.0, 100),  # no sampling
]
INTEGER_ORDERS = [float(a) for a in DEFAULT_RDP_ORDERS if a == int(a)]


def their_pld_epsilon(event: de.DpEvent, delta: float, interval: float) -> float:
    accountant = PLDAccountant(NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=interval)
    return float(accountant.compose(event).get_epsilon(delta))


def their_rdp_epsilon(event: de.DpEvent, delta: float, orders) -> tuple[float, float]:
    accountant = RdpAccountant(list(orders), NeighboringRelation.ADD_OR_REMOVE_ONE)
    eps, order = accountant.compose(event).get_epsilon_and_optimal_order(delta)
    return float(eps), float(order)


# ---------------------------------------------------------------------------------------------
# to_dp_event


def test_subsampled_gaussian_is_a_self_composed_poisson_sampled_gaussian():
    assert to_dp_event(SubsampledGaussian(1.1, 0.01, 100)) == de.SelfComposedDpEvent(
        de.PoissonSampledDpEvent(0.01, de.GaussianDpEvent(1.1)), 100
    )


def test_no_sampling_is_a_self_composed_gaussian():
    assert to_dp_event(SubsampledGaussian(2.0, 1.0, 7)) == de.SelfComposedDpEvent(de.GaussianDpEvent(2.0), 7)


def test_no_step_is_a_no_op():
    # dp-accounting refuses SelfComposedDpEvent(count=0); releasing nothing costs nothing, as ours say.
    assert to_dp_event(SubsampledGaussian(1.0, 0.1, 0)) == de.NoOpDpEvent()
    assert account_event(SubsampledGaussian(1.0, 0.1, 0), DELTA, "rdp").epsilon == 0.0


def test_composition_is_a_composed_dp_event():
    a, b = SubsampledGaussian(1.0, 0.1, 10), SubsampledGaussian(2.0, 1.0, 3)
    assert to_dp_event(Composed((a, Composed((b,))))) == de.ComposedDpEvent(
        [to_dp_event(a), de.ComposedDpEvent([to_dp_event(b)])]
    )


def test_identical_silos_are_one_silo_and_different_silos_are_refused():
    silo = SubsampledGaussian(1.0, 0.1, 10)
    assert to_dp_event(ParallelSilos((silo, silo))) == to_dp_event(silo)
    different = ParallelSilos((silo, SubsampledGaussian(1.0, 0.2, 10)))
    with pytest.raises(InvalidParameter, match="no parallel composition.*silo_dp_events"):
        to_dp_event(different)
    assert silo_dp_events(different) == [to_dp_event(s) for s in different.silos]
    assert silo_dp_events(silo) == [to_dp_event(silo)]


def test_a_group_of_one_record_is_the_record():
    mech = SubsampledGaussian(1.0, 0.1, 10)
    assert to_dp_event(Group(mech, 1)) == to_dp_event(mech)


@pytest.mark.parametrize(
    "event,reason",
    [
        (Group(SubsampledGaussian(1.0, 0.1, 10), 4), "no group-privacy event"),
        (KnownParticipation(1.0, 0.1, 10), "knows in which rounds"),
        (Composed((SubsampledGaussian(1.0, 0.1, 10), KnownParticipation(1.0, 0.1, 10))), "knows"),
    ],
)
def test_events_dp_accounting_cannot_describe_are_refused_with_the_reason(event, reason):
    with pytest.raises(InvalidParameter, match=reason):
        to_dp_event(event)


# ---------------------------------------------------------------------------------------------
# Re-accounted by dp-accounting: the same epsilons


@pytest.mark.parametrize("mech", RUNS, ids=str)
def test_dp_accounting_pld_accountant_gives_our_pld_epsilon(mech):
    """Same PLDs (pessimistic, connect-the-dots, add-or-remove) on the same grid. They differ only
    in how the self-composition is carried out (we compose a dense copy, accountants/tight/pld.py
    `_as_dense`), so in rounding and in the 1e-15 tail truncation: measured up to 7e-11 relative."""
    theirs = their_pld_epsilon(to_dp_event(mech), DELTA, _default_discretization(mech, (1,)))
    ours = account_event(mech, DELTA, "pld").epsilon
    assert ours == pytest.approx(theirs, rel=1e-9)


def test_dp_accounting_pld_accountant_gives_our_epsilon_of_a_composition():
    parts = (SubsampledGaussian(1.0, 0.01, 500), SubsampledGaussian(3.0, 0.05, 300))
    # pld_epsilon_composed puts all parts on the finest of their default grids.
    interval = min(_default_discretization(m, (1,)) for m in parts)
    theirs = their_pld_epsilon(to_dp_event(Composed(parts)), DELTA, interval)
    assert account_event(Composed(parts), DELTA, "pld").epsilon == pytest.approx(theirs, rel=1e-9)


def test_silo_events_give_our_parallel_silos_epsilon_as_their_maximum():
    silos = ParallelSilos((SubsampledGaussian(1.0, 0.01, 500), SubsampledGaussian(1.5, 0.05, 400)))
    theirs = max(
        their_pld_epsilon(event, DELTA, _default_discretization(silo, (1,)))
        for silo, event in zip(silos.silos, silo_dp_events(silos))
    )
    assert account_event(silos, DELTA, "pld").epsilon == pytest.approx(theirs, rel=1e-9)


@pytest.mark.parametrize("mech", RUNS, ids=str)
def test_dp_accounting_rdp_accountant_gives_our_rdp_epsilon(mech):
    """dp-accounting converts with Canonne, Kamath, Steinke 2020 Prop. 12 (its compute_epsilon),
    our "improved" conversion, with the same total-variation rule; it skips orders <= 1.01, which
    its default orders do not hold. At integer orders both evaluate the same binomial sum:
    agreement to 1e-9 relative (measured 4e-14), at the same order. At fractional orders our
    series keeps its alternating signs and is lower (tests/accountants/test_rdp.py checks it
    against quadrature), so with dp-accounting's full default orders ours is never above theirs
    and within 1e-3 (measured up to 2e-5)."""
    event = to_dp_event(mech)
    theirs, their_order = their_rdp_epsilon(event, DELTA, INTEGER_ORDERS)
    ours = account_event(mech, DELTA, "rdp", orders=INTEGER_ORDERS, conversion="improved")
    assert ours.epsilon == pytest.approx(theirs, rel=1e-9)
    assert ours.order == their_order
    theirs, _ = their_rdp_epsilon(event, DELTA, DEFAULT_RDP_ORDERS)
    ours = account_event(mech, DELTA, "rdp", orders=list(DEFAULT_RDP_ORDERS), conversion="improved")
    assert theirs * (1 - 1e-3) <= ours.epsilon <= theirs * (1 + 1e-12)


def test_dp_accounting_rdp_accountant_gives_our_epsilon_of_a_composition():
    parts = (
        SubsampledGaussian(1.0, 0.01, 500),
        SubsampledGaussian(3.0, 0.05, 300),
        SubsampledGaussian(4.0, 1, 2),
    )
    theirs, _ = their_rdp_epsilon(to_dp_event(Composed(parts)), DELTA, INTEGER_ORDERS)
    ours = account_event(Composed(parts), DELTA, "rdp", orders=INTEGER_ORDERS, conversion="improved")
    assert ours.epsilon == pytest.approx(theirs, rel=1e-9)


# ---------------------------------------------------------------------------------------------
# DpEvent dicts


def test_dict_form_is_keyed_by_the_class_name():
    assert dp_event_to_dict(to_dp_event(SubsampledGaussian(1.1, 0.01, 100_000))) == {
        "type": "SelfComposedDpEvent",
        "event": {
            "type": "PoissonSampledDpEvent",
            "sampling_probability": 0.01,
            "event": {"type": "GaussianDpEvent", "noise_multiplier": 1.1},
        },
        "count": 100_000,
    }


_floats = st.floats(1e-6, 1e6, allow_nan=False, allow_infinity=False)
_probs = st.floats(1e-9, 1.0)
_leaves = st.one_of(
    st.builds(de.GaussianDpEvent, _floats),
    st.builds(de.LaplaceDpEvent, _floats),
    st.builds(de.ZCDpEvent, _floats, _floats),
    st.builds(de.RandomizedResponseDpEvent, _probs, st.integers(1, 100)),
    st.builds(de.NoOpDpEvent),
    st.builds(de.NonPrivateDpEvent),
    st.lists(st.tuples(st.floats(0, 100), _probs), min_size=1, max_size=5).map(
        lambda pairs: de.MixtureOfGaussiansDpEvent(1.5, [s for s, _ in pairs], [p for _, p in pairs])
    ),
)
dp_events = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.builds(de.PoissonSampledDpEvent, _probs, inner),
        st.builds(de.SelfComposedDpEvent, inner, st.integers(1, 10**9)),
        st.builds(de.ComposedDpEvent, st.lists(inner, min_size=1, max_size=4)),
        st.builds(de.SampledWithoutReplacementDpEvent, st.integers(1, 10**6), st.integers(1, 100), inner),
    ),
    max_leaves=8,
)


@given(dp_events)
def test_dict_round_trips_through_json(event):
    d = dp_event_to_dict(event)
    again = json.loads(json.dumps(d, allow_nan=False))
    assert again == d
    assert dp_event_from_dict(again) == event


@given(dp_events)
def test_dict_holds_what_to_named_tuple_holds(event):
    """Our dict is dp-accounting's own named-tuple form with class_name as "type" (module implied)."""

    def plain(x):
        if hasattr(x, "class_name"):
            assert x.module_name == "dp_accounting.dp_event"
            return {"type": x.class_name, **{f: plain(getattr(x, f)) for f in x._fields[2:]}}
        return [plain(v) for v in x] if isinstance(x, (list, tuple)) else x

    assert dp_event_to_dict(event) == plain(event.to_named_tuple())


@given(st.builds(SubsampledGaussian, st.floats(0.1, 100), st.floats(1e-6, 1.0), st.integers(0, 10**7)))
def test_our_events_round_trip_as_dicts(mech):
    event = to_dp_event(mech)
    assert dp_event_from_dict(json.loads(json.dumps(dp_event_to_dict(event)))) == event


def test_tf_privacy_mixture_with_a_range_and_an_array_is_written():
    """TF-Privacy's user-level PLD event; to_named_tuple fails on it (range(list) is a TypeError)."""
    event = de.MixtureOfGaussiansDpEvent(1.0, range(3), np.array([0.25, 0.5, 0.25]))
    with pytest.raises(TypeError):
        event.to_named_tuple()
    d = dp_event_to_dict(event)
    assert d == {
        "type": "MixtureOfGaussiansDpEvent",
        "standard_deviation": 1.0,
        "sensitivities": [0, 1, 2],
        "sampling_probs": [0.25, 0.5, 0.25],
    }
    assert json.loads(json.dumps(d)) == d


@pytest.mark.parametrize(
    "d,message",
    [
        ([], "expected a DpEvent object"),
        ({"noise_multiplier": 1.0}, "None is not a dp-accounting event type"),
        ({"type": "DpEvent"}, "not a dp-accounting event type"),
        ({"type": "DpEventNamedTuple"}, "not a dp-accounting event type"),
        ({"type": "importlib"}, "not a dp-accounting event type"),
        ({"type": "__builtins__"}, "not a dp-accounting event type"),
        ({"type": "GaussianDpEvent"}, "needs the field 'noise_multiplier'"),
        ({"type": "GaussianDpEvent", "noise_multiplier": 1.0, "sigma": 2}, "has no field 'sigma'"),
        (
            {"type": "GaussianDpEvent", "noise_multiplier": "1.0"},
            r"event.noise_multiplier: expected a number",
        ),
        ({"type": "GaussianDpEvent", "noise_multiplier": True}, "expected a number"),
        (
            {"type": "SelfComposedDpEvent", "event": {"type": "NoOpDpEvent"}, "count": 10.0},
            r"event.count: expected an integer",
        ),
        (
            {"type": "SelfComposedDpEvent", "event": {"type": "Nope"}, "count": 1},
            r"event.event: 'Nope' is not",
        ),
        ({"type": "ComposedDpEvent", "events": [{"type": "X"}]}, r"event.events\[0\]: 'X' is not"),
    ],
)
def test_malformed_dicts_are_data_errors_naming_the_place(d, message):
    with pytest.raises(DataError, match=message):
        dp_event_from_dict(d)


def test_a_json_integer_is_taken_for_a_float_field():
    assert dp_event_from_dict({"type": "GaussianDpEvent", "noise_multiplier": 2}) == de.GaussianDpEvent(2.0)


@pytest.mark.parametrize(
    "event,message",
    [
        ("GaussianDpEvent", "expected one of dp_accounting.dp_event's events"),
        (de.GaussianDpEvent(math.inf), "not a finite number"),
        (de.GaussianDpEvent("1.0"), "cannot write a str"),
    ],
)
def test_what_cannot_be_written_is_refused(event, message):
    with pytest.raises(InvalidParameter, match=message):
        dp_event_to_dict(event)


# ---------------------------------------------------------------------------------------------
# Opacus


def test_opacus_history_of_one_entry_is_one_mechanism():
    assert opacus_events([(1.1, 0.01, 300)]) == SubsampledGaussian(1.1, 0.01, 300)


def test_opacus_consecutive_identical_entries_merge_and_others_compose_in_order():
    history = [(1.0, 0.01, 10), (1.0, 0.01, 5), (2.0, 0.01, 3), (1.0, 0.01, 1)]
    assert opacus_events(history) == Composed(
        (
            SubsampledGaussian(1.0, 0.01, 15),
            SubsampledGaussian(2.0, 0.01, 3),
            SubsampledGaussian(1.0, 0.01, 1),
        )
    )


def test_opacus_state_dict_json_state_and_checkpoint_read_alike(tmp_path):
    history = [(1.5, 0.04, 2000), (1.0, 0.04, 250)]
    state = OrderedDict(history=history, mechanism="rdp")  # RDPAccountant.state_dict()
    expected = Composed((SubsampledGaussian(1.5, 0.04, 2000), SubsampledGaussian(1.0, 0.04, 250)))
    assert opacus_events(state) == expected
    assert opacus_events(json.loads(json.dumps(state))) == expected  # tuples become lists
    # PrivacyEngine.save_checkpoint's dict
    assert opacus_events({"module_state_dict": {}, "privacy_accountant_state_dict": state}) == expected
    path = tmp_path / "accountant.json"
    path.write_text(json.dumps(state))
    assert read_opacus_file(path) == expected


def test_opacus_numpy_scalars_are_numbers():
    assert opacus_events([(np.float64(1.0), np.float32(0.5), np.int64(3))]) == SubsampledGaussian(1.0, 0.5, 3)


def test_opacus_rdp_epsilon_is_opacus_own():
    """opacus/tests/accountants_test.py::test_rdp_accountant: 2250 steps at sigma 1.5, rate 0.04
    give 7.32911117143 at delta 1e-5 (DEFAULT_ALPHAS, our "tf-privacy" orders, Balle et al. 2020
    Thm. 21, our "improved" conversion). Measured 1e-10 apart; its test checks 7 places."""
    event = opacus_events({"history": [(1.5, 0.04, int(90 / 0.04))], "mechanism": "rdp"})
    ours = account_event(event, 1e-5, "rdp", orders="tf-privacy", conversion="improved")
    assert ours.epsilon == pytest.approx(7.32911117143, abs=1e-7)


@pytest.mark.parametrize("mechanism", ["prv", "gdp"])
def test_opacus_state_of_another_accountant_is_refused(mechanism):
    with pytest.raises(DataError) as raised:
        opacus_events({"history": [(1.0, 0.1, 3)], "mechanism": mechanism})
    assert str(raised.value) == (
        f"the Opacus accountant state is of type '{mechanism}'; uldp report reads RDPAccountant "
        "states (mechanism 'rdp')"
    )


@pytest.mark.parametrize(
    "obj,message",
    [
        ({"history": [(1.0, 0.1, 3)]}, "no 'mechanism' key"),
        ({"mechanism": "rdp"}, "no 'history' key"),
        ({}, "no 'history' key"),
        ({"privacy_accountant_state_dict": [1]}, "not an Opacus accountant state"),
        ({"history": {"a": 1}, "mechanism": "rdp"}, "must be a list"),
        ("history", "must be a list"),
        (42, "must be a list"),
        ([], "history is empty"),
        ([(1.0, 0.1)], r"entry 0 is \(1.0, 0.1\), not \(noise_multiplier"),
        ([(1.0, 0.1, 3), "abc"], "entry 1 is 'abc'"),
        ([(0.0, 0.1, 3)], r"entry 0: noise_multiplier must be in \[1e-100, 1e\+06\], got 0"),
        ([(-1.0, 0.1, 3)], "noise_multiplier must be in"),
        ([(math.nan, 0.1, 3)], "noise_multiplier must be a finite number"),
        ([("1.0", 0.1, 3)], "noise_multiplier must be a finite number"),
        ([(1.0, 0.0, 3)], r"sample_rate must be in \(0, 1\], got 0"),
        ([(1.0, 1.5, 3)], "sample_rate must be in"),
        ([(1.0, True, 3)], "sample_rate must be a finite number"),
        ([(1.0, 0.1, 3.0)], "num_steps must be an integer, got 3.0"),
        ([(1.0, 0.1, 0)], "num_steps must be >= 1, got 0"),
    ],
)
def test_malformed_opacus_input_is_one_line_naming_the_problem(obj, message):
    with pytest.raises(DataError, match=message) as raised:
        opacus_events(obj)
    assert "\n" not in str(raised.value)


def test_read_opacus_file_names_the_file_in_its_errors(tmp_path):
    bad = tmp_path / "state.json"
    bad.write_text('{"history": [[1.0, 0.1, 3]], "mechanism": "prv"}')
    with pytest.raises(DataError, match="^state.json: the Opacus accountant state is of type 'prv'"):
        read_opacus_file(bad)
    bad.write_text("{not json")
    with pytest.raises(DataError, match="^state.json: not JSON"):
        read_opacus_file(bad)
    with pytest.raises(DataError, match="missing.json: no such file"):
        read_opacus_file(tmp_path / "missing.json")


# ---------------------------------------------------------------------------------------------
# TF-Privacy's DP-SGD description

# compute_dp_sgd_privacy_lib.py computes, for the statement's Poisson line,
#   q = batch_size / number_of_examples, steps = int(math.ceil(num_epochs / q)),
# and for its once-per-epoch line int(math.ceil(num_epochs)) Gaussians.
# TF-Privacy's MNIST tutorial clips each example on its own (microbatches of one): no halving.
MNIST = DpSgdDescription(
    noise_multiplier=1.1, batch_size=256, dataset_size=60000, epochs=60, used_microbatching=False
)
# The kwargs of TF-Privacy's statement tests (compute_dp_sgd_privacy_test.py), with microbatching.
STATEMENT = DpSgdDescription(2.0, 64, 10000, 5.0, max_examples_per_user=None, used_microbatching=True)


def test_q_and_steps_are_tf_privacy_s():
    assert MNIST.q == 256 / 60000 == 0.004266666666666667
    assert MNIST.steps == 14063  # 60 / q = 14062.5
    assert MNIST.mechanism() == SubsampledGaussian(1.1, 256 / 60000, 14063)
    assert MNIST.mechanism(poisson=False) == SubsampledGaussian(1.1, 1.0, 60)
    assert STATEMENT.q == 0.0064 and STATEMENT.steps == 782  # 5 / 0.0064 = 781.25
    assert STATEMENT.sigma == 1.0  # microbatching halves the multiplier
    assert DpSgdDescription(1.0, 10, 100, 1.2).epoch_steps == 2
    # TF-Privacy's floating point kept: 3 / (3 / 47) = 47.00000000000001, so 48 steps, not 47.
    assert DpSgdDescription(1.0, 3, 47, 3).steps == 48


def test_mnist_epsilon_of_tf_privacy_readme():
    """tutorials/README.md: `compute_dp_sgd_privacy.py --N=60000 --batch_size=256
    --noise_multiplier=1.1 --epochs=60 --delta=1e-5` gives eps = 3.01. That README number is from
    the TF-Privacy of the time: orders [1 + x / 10 for x in 1..99] + 12..63 (our "tf-privacy"
    preset) and Mironov's conversion (our "classic"). Ours: 3.00838. With today's improved
    conversion the same run is 2.597 by RDP, 2.382 by PLD."""
    ours = account_event(MNIST.mechanism(), 1e-5, "rdp", orders=list(TF_PRIVACY_ORDERS), conversion="classic")
    assert round(ours.epsilon, 2) == 3.01


@pytest.mark.parametrize(
    "n,batch,sigma,epochs,delta,eps,order",
    [
        (60000, 150, 1.3, 15, 1e-5, 0.7242234026109595, 19.0),
        (100000, 100, 1.0, 30, 1e-7, 1.4154988495444842, 13.0),
    ],
)
def test_tf_privacy_compute_dp_sgd_privacy_values(n, batch, sigma, epochs, delta, eps, order):
    """compute_dp_sgd_privacy_test.py's values of the deprecated compute_dp_sgd_privacy (q =
    batch / n, ceil(epochs n / batch) steps, dp-accounting's RDP at its order list below): the
    same to 1e-9 relative (measured 5e-13) at the same integer order."""
    orders = [1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 4.5] + list(range(5, 64)) + [128, 256, 512]
    # The deprecated function ignores microbatching (it never halves the multiplier).
    description = DpSgdDescription(sigma, batch, n, epochs, used_microbatching=False)
    assert description.steps == math.ceil(epochs * n / batch)
    ours = account_event(description.mechanism(), delta, "rdp", orders=orders, conversion="improved")
    assert ours.epsilon == pytest.approx(eps, rel=1e-9)
    assert ours.order == order


def test_tf_privacy_statement_example_level_values():
    """compute_dp_sgd_privacy_test.py's statement (delta 1e-6, with microbatching), printed to
    three decimals: RDP (dp-accounting's default orders) 1.616 with Poisson sampling, 13.376 once
    per epoch; PLD 1.199 and 12.595. Our PLD picks its own grid (1e-4 there): it rounds the same."""
    rdp = lambda event: account_event(event, 1e-6, "rdp", orders=list(DEFAULT_RDP_ORDERS)).epsilon
    pld = lambda event: account_event(event, 1e-6, "pld").epsilon
    assert round(rdp(STATEMENT.mechanism()), 3) == 1.616
    assert round(rdp(STATEMENT.mechanism(poisson=False)), 3) == 13.376
    assert round(pld(STATEMENT.mechanism()), 3) == 1.199
    assert round(pld(STATEMENT.mechanism(poisson=False)), 3) == 12.595


def test_tf_privacy_statement_user_level_values():
    """The same statement's user-level lines. Once per epoch, k examples in one batch: the
    multiplier over k; RDP, k = 3: 56.224 (ours the same event: equal to print precision).
    With Poisson sampling, PLD, k = 2: TF-Privacy's mixture of Gaussians is our pld group method's
    (2.532, ours 2.53212). RDP, k = 3: TF-Privacy's Vadhan Lemma 2.2 gives 6.425; our "normal"
    method's Kasiviswanathan-Smith delta' k e^((k-1) eps) is larger than Vadhan's
    (e^(k eps) - 1) / (e^eps - 1), so ours is above it (6.88), never below."""
    three = DpSgdDescription(2.0, 64, 10000, 5.0, max_examples_per_user=3, used_microbatching=True)
    two = DpSgdDescription(2.0, 64, 10000, 5.0, max_examples_per_user=2, used_microbatching=True)
    once = three.user_event(poisson=False)
    assert once == SubsampledGaussian(1.0 / 3, 1.0, 5)
    assert round(account_event(once, 1e-6, "rdp", orders=list(DEFAULT_RDP_ORDERS)).epsilon, 3) == 56.224
    assert two.user_event() == Group(two.mechanism(), 2)
    assert round(account_event(two.user_event(), 1e-6, "pld").epsilon, 3) == 2.532
    normal = account_event(
        three.user_event(), 1e-6, "rdp", group_method="normal", orders=list(DEFAULT_RDP_ORDERS)
    ).epsilon
    assert 6.425 < normal < 6.425 * 1.1


def test_one_example_per_user_is_example_level_and_no_bound_is_refused():
    one = DpSgdDescription(1.0, 10, 1000, 2, max_examples_per_user=1)
    assert one.user_event() == one.mechanism()
    assert one.user_event(poisson=False) == one.mechanism(poisson=False)
    with pytest.raises(InvalidParameter, match="max_examples_per_user is needed"):
        MNIST.user_event()


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(noise_multiplier=0.0), "noise_multiplier"),
        (dict(noise_multiplier=math.nan), "noise_multiplier"),
        (dict(noise_multiplier="1"), "noise_multiplier"),
        (dict(batch_size=0), "batch_size"),
        (dict(batch_size=2.5), "batch_size"),
        (dict(dataset_size=5), "dataset_size"),
        (dict(dataset_size=True), "dataset_size"),
        (dict(epochs=0), "epochs"),
        (dict(epochs=math.inf), "epochs"),
        (dict(max_examples_per_user=0), "max_examples_per_user"),
        (dict(max_examples_per_user=1.5), "max_examples_per_user"),
        (dict(used_microbatching=1), "used_microbatching"),
    ],
)
def test_invalid_descriptions_name_the_field(kwargs, field):
    args = dict(noise_multiplier=1.0, batch_size=10, dataset_size=100, epochs=1.0) | kwargs
    with pytest.raises(InvalidParameter, match=f"^{field} "):
        DpSgdDescription(**args)
