"""Kubernetes resource quantities as Go's resource.Quantity reads and writes them.

Trainer reads every quantity it copies (the template's resources, resourcesPerNode)
into a Quantity and writes it back in canonical form: `1000m` becomes `1`, `2048Mi`
`2Gi`, `0.5` `500m`, a number `2` the string "2". The JobSet tfjob builds holds the
same strings. Whole-number values (`Value()`) round up, as Go's do.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_FACTORS = {
    **{suffix: Decimal(1024) ** i for i, suffix in enumerate(_BINARY) if suffix},
    **{suffix: Decimal(10) ** exp for exp, suffix in _DECIMAL.items() if suffix},
}
_FORM = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$"
)


def parse(text: Any) -> tuple[Decimal, str]:
    """(value, format): format "binary", "exponent" or "decimal"."""
    match = _FORM.match(str(text).strip())
    if match is None:
        raise ValueError(f"quantities must match the regular expression of Kubernetes: {text!r}")
    number, exponent, suffix = match.groups()
    value = Decimal(number)
    if exponent:
        return value * Decimal(10) ** int(exponent[1:]), "exponent"
    if suffix:
        return value * _FACTORS[suffix], "binary" if suffix in _BINARY else "decimal"
    return value, "decimal"


def value(text: Any) -> int:
    """The quantity as a whole number, rounded up (Quantity.Value())."""
    return math.ceil(parse(text)[0])


def canonical(text: Any) -> str:
    """The quantity as Go writes it."""
    amount, form = parse(text)
    if amount == 0:
        return "0"
    if form == "binary" and abs(amount) >= 1024 and amount == amount.to_integral_value():
        power = 0
        while power < len(_BINARY) - 1 and amount % (Decimal(1024) ** (power + 1)) == 0:
            power += 1
        return f"{int(amount / Decimal(1024) ** power)}{_BINARY[power]}"
    exp = -9
    while (
        exp < 18
        and (amount / Decimal(10) ** (exp + 3))
        == (amount / Decimal(10) ** (exp + 3)).to_integral_value()
    ):
        exp += 3
    mantissa = math.ceil(amount / Decimal(10) ** exp)  # below a nano rounds up
    if form == "exponent":
        return f"{mantissa}e{exp}" if exp else str(mantissa)
    return f"{mantissa}{_DECIMAL[exp]}"


def _whole(number: Decimal) -> bool:
    return number == number.to_integral_value()


def canonical_resources(resources: dict[str, Any]) -> dict[str, Any]:
    """A ResourceRequirements with its limits and requests canonical."""
    out = dict(resources)
    for key in ("limits", "requests"):
        if isinstance(resources.get(key), dict):
            out[key] = {name: canonical(q) for name, q in resources[key].items()}
    return out
