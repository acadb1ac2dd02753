"""Money in the state: ``Decimal`` currency rounded to cents, never float.

The system of record answers prices and balances as JSON numbers (floats); each is
converted through its shortest decimal text (``Decimal(str(826.7))`` is ``826.7``, not the
binary float's ``826.7000000000000454...``), then rounded to cents, so 500.01 stays
500.01. In the state's JSON form (queries, the API, continue-as-new, the model's view) an
amount is a string such as ``"826.70"``. Pure: imported inside the workflow sandbox.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import BeforeValidator

CENT = Decimal("0.01")
AMOUNT_TEXT = re.compile(r"-?[0-9]{1,26}(\.[0-9]{1,2})?")
"""Money given as text (a saved state's JSON): ASCII digits, at most cents. Text is what a
person may have edited, so it is taken exactly or refused, never rounded or guessed."""


def money(value: Any) -> Decimal:
    """``value`` (a float, int, str or Decimal of currency) as a Decimal rounded to cents
    (half up; text must already be exact cents, ``AMOUNT_TEXT``). Raises ``ValueError`` for
    anything else: a bool, text that is not a plain decimal with at most two places (digit
    separators, non-ASCII digits, sub-cent text), NaN or an infinity."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        raise ValueError(f"an amount of money must be a number, not {type(value).__name__}")
    if isinstance(value, str) and not AMOUNT_TEXT.fullmatch(value.strip()):
        raise ValueError("an amount of money given as text must be a plain decimal with at most two places, "
                         "such as 826.70")
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError("an amount of money must be a number") from None
    if not amount.is_finite():
        raise ValueError("an amount of money must be a finite number")
    try:
        return amount.quantize(CENT, rounding=ROUND_HALF_UP)
    except InvalidOperation:  # more digits than the decimal context holds
        raise ValueError("an amount of money must have at most 26 digits before the point") from None


Money = Annotated[Decimal, BeforeValidator(money)]
"""A state field holding currency: validated from a number or numeric text into a cent
``Decimal``; serialised to JSON as a string (``"826.70"``)."""
