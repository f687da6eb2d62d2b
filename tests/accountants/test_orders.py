"""Orders: one frozen description of an order set, parsed once."""

import numpy as np
import pytest

from uldp.accountants.orders import DEFAULT_ORDERS, FIRST_STAGE_MAX_ORDER, TF_PRIVACY_ORDERS, Orders
from uldp.errors import InvalidParameter


@pytest.mark.parametrize("text", ["default", "tf-privacy", "1.5,2,4", "2, 4,3"])
def test_parse_keeps_the_text_and_round_trips(text):
    orders = Orders.parse(text)
    assert str(orders) == text
    assert Orders.parse(str(orders)) == orders
    assert Orders.parse(orders) is orders


def test_presets_share_the_module_arrays():
    assert Orders.parse("default").grid is DEFAULT_ORDERS
    assert Orders.parse("tf-privacy").grid is TF_PRIVACY_ORDERS


def test_a_list_is_sorted_and_deduplicated():
    orders = Orders.parse([4, 2, 2, 3.5])
    np.testing.assert_array_equal(orders.grid, [2.0, 3.5, 4.0])
    assert orders.label == "custom (3 orders, 2..4)"
    assert Orders.parse(orders.text) == orders


def test_labels():
    assert Orders.parse("default").label.startswith(f"default ({DEFAULT_ORDERS.size} orders, 1.05..")
    assert Orders.parse("tf-privacy").label == "tf-privacy (151 orders, 1.1..63)"


def test_only_the_default_preset_is_staged():
    first, full = Orders.parse("default").stages()
    assert first[-1] <= FIRST_STAGE_MAX_ORDER < full[-1]
    assert len(Orders.parse("tf-privacy").stages()) == 1
    assert len(Orders.parse("2,300,1000").stages()) == 1


@pytest.mark.parametrize("bad", ["abc", "1,2", "", [0.5, 2], [float("inf")]])
def test_bad_sets_are_refused(bad):
    with pytest.raises(InvalidParameter):
        Orders.parse(bad)


def test_orders_are_hashable_values():
    assert len({Orders.parse("2,3"), Orders.parse("2, 3".replace(" ", ""))}) == 1
