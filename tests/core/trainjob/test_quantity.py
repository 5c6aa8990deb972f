"""Quantities as Go's resource.Quantity writes them back, and their whole values."""

from __future__ import annotations

import pytest

from tfjob.frameworks.mlpolicy.quantity import canonical, value


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ("1000m", "1"), ("0.5", "500m"), (2, "2"), ("2000", "2k"), ("2500", "2500"),
        ("1500000", "1500k"), ("2048Mi", "2Gi"), ("1536Mi", "1536Mi"), ("0.5Gi", "512Mi"),
        ("1024", "1024"), ("1e3", "1e3"), ("0.1m", "100u"), ("0", "0"), ("1G", "1G"),
    ],
)  # fmt: skip
def test_canonical(given: object, written: str) -> None:
    assert canonical(given) == written


def test_value_rounds_up() -> None:
    assert [value("1500m"), value("2"), value("100m"), value("1Ki")] == [2, 2, 1, 1024]


def test_not_a_quantity() -> None:
    with pytest.raises(ValueError, match="quantities must match"):
        canonical("two")
