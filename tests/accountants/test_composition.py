"""The cached RDP composition gives exactly what `record_level` gives for one mechanism."""

import pytest

from uldp.accountants.account import rdp_epsilon, record_level
from uldp.accountants.events import SubsampledGaussian


@pytest.mark.parametrize(
    "sigma, q, steps",
    [(1.0, 0.01, 1), (0.9487, 0.01, 100000), (5.0, 0.001, 10), (0.6, 1.0, 3), (2.0, 0.3, 0)],
)
@pytest.mark.parametrize(
    "conversion, orders", [("improved", "default"), ("classic", "tf-privacy"), ("improved", "2,4,8,32")]
)
def test_one_mechanism_matches_record_level(sigma, q, steps, conversion, orders):
    expected = record_level(SubsampledGaussian(sigma, q, steps), 1e-5, "rdp", conversion, orders).epsilon
    assert rdp_epsilon([(sigma, q, steps)], 1e-5, conversion, orders) == expected


def test_parts_compose_by_adding_curves():
    # two halves of a run compose to the whole run
    whole = rdp_epsilon([(1.0, 0.02, 600)], 1e-6)
    assert rdp_epsilon([(1.0, 0.02, 200), (1.0, 0.02, 400)], 1e-6) == pytest.approx(whole, rel=1e-12)
    assert rdp_epsilon([(1.0, 0.02, 200), (1.0, 0.05, 400)], 1e-6) > whole


def test_bad_input():
    with pytest.raises(ValueError):
        rdp_epsilon([(0.0, 0.1, 1)], 1e-5)
    with pytest.raises(ValueError):
        rdp_epsilon([(1.0, 0.1, 1)], 1.0)
