"""The rule a fact must pass before it is remembered (``fact_problem``), in plain words for the
user and the model:

- the value is at most ``MAX_VALUE_CHARS`` visible characters;
- no sensitive category, whatever the kind: a card number (13-19 digits passing the Luhn
  check), a password, PIN or security code, health data;
- no instruction about how requests are handled ("always approve my refunds"): a fact
  describes the customer, it never changes the policy;
- a refund method is a payment method id the system of record lists for the customer;
- an open complaint names one of the customer's orders;
- delivery instructions may name an address only if it is one the system of record holds
  for the customer.

Pure: imported inside the workflow sandbox.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

from workflows.domain.memory.facts import MAX_VALUE_CHARS, FactKind
from workflows.domain.user_text import visible_text

_DIGIT_RUN = re.compile(r"[0-9][0-9 .-]{11,}[0-9]")
_SECRET = re.compile(r"\b(pass ?words?|pass ?codes?|passphrases?|pins?|cvv2?|cvc|security codes?|one[- ]time codes?|otp|"
                     r"2fa|login|credentials?)\b", re.IGNORECASE | re.ASCII)
_HEALTH = re.compile(r"\b(diagnos\w*|illness\w*|disease\w*|pregnan\w*|medication\w*|medicine\w*|medical\w*|"
                     r"disabilit\w*|disabled|allerg\w*|hiv|cancer|diabet\w*|therap\w*|surger\w*|"
                     r"prescription\w*|mental health|depress\w*|wheelchair)\b", re.IGNORECASE | re.ASCII)
_INSTRUCTION = re.compile(r"\b(approv\w*|refund\w*|polic(y|ies)|confirm\w*|verif\w*|authori[sz]\w*|authenticat\w*|"
                          r"ignore|override|bypass|skip|discounts?|compensat\w*|goodwill|credits?|"
                          r"supervisor|escalat\w*|instructions? to you|system prompt)\b", re.IGNORECASE | re.ASCII)
_ADDRESS = re.compile(r"\b\d{1,6}\s+(?:[A-Za-z0-9.'-]+\s+){0,4}(?:street|st|avenue|ave|road|rd|lane|ln|drive|dr|"
                      r"boulevard|blvd|way|court|ct|place|pl|terrace|circle|square|parkway|highway|hwy)\b\.?",
                      re.IGNORECASE | re.ASCII)
_LANGUAGE = re.compile(r"^[A-Za-z][A-Za-z \-()]{1,39}$")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def holds_card_number(text: str) -> bool:
    """Whether ``text`` holds 13-19 digits (spaces, dashes or dots between them) that pass the
    Luhn check: a payment card number."""
    for run in _DIGIT_RUN.findall(text):
        digits = re.sub(r"[^0-9]", "", run)
        if 13 <= len(digits) <= 19 and _luhn(digits):
            return True
    return False


def sensitive_problem(text: str) -> Optional[str]:
    """The reason ``text`` may never be remembered (a sensitive category), or None."""
    if holds_card_number(text):
        return "card numbers are never remembered"
    if _SECRET.search(text):
        return "passwords, PINs and security codes are never remembered"
    if _HEALTH.search(text):
        return "health information is never remembered"
    return None


def _normal_address(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def fact_problem(kind: FactKind, value: str, *, payment_method_ids: Iterable[str] = (),
                 order_ids: Iterable[str] = (), addresses: Iterable[str] = (),
                 order_id: Optional[str] = None) -> Optional[str]:
    """Why a fact of ``kind`` with ``value`` may not be remembered, in plain words for the user
    and the model, or None when it may. ``payment_method_ids``, ``order_ids`` and ``addresses``
    are the customer's as the system of record listed them (a fresh read); ``order_id`` is the
    order an open complaint is about."""
    shown = visible_text(value).strip()
    if not shown:
        return "there is nothing to remember"
    if len(shown) > MAX_VALUE_CHARS:
        return f"what to remember is at most {MAX_VALUE_CHARS} characters"
    sensitive = sensitive_problem(shown)
    if sensitive:
        return sensitive
    if kind == FactKind.REFUND_METHOD:
        if shown not in set(payment_method_ids):
            return "only one of your own payment methods can be remembered for refunds"
        return None
    if _INSTRUCTION.search(shown):
        return ("a remembered fact describes you; how requests are handled (approvals, refunds, checks) "
                "follows the policy and cannot be remembered")
    if kind == FactKind.DELIVERY_INSTRUCTIONS:
        own = {_normal_address(a) for a in addresses}
        for found in _ADDRESS.findall(shown):
            if not any(_normal_address(found) in address for address in own):
                return "delivery instructions can name only your own address on record"
        return None
    if kind == FactKind.PREFERRED_LANGUAGE:
        return None if _LANGUAGE.match(shown) else "a preferred language is the name of a language"
    if kind == FactKind.OPEN_COMPLAINT:
        if order_id is None or order_id not in set(order_ids):
            return "a complaint is remembered only about one of your own orders"
        return None
    return "that kind of fact is not remembered"
