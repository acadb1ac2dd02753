"""The rule a fact must pass before it is remembered (``fact_problem``), in plain words for the
user and the model:

- the value is at most ``MAX_VALUE_CHARS`` visible characters;
- no control or invisible character;
- no sensitive category, whatever the kind (full-width letters and digits read as ASCII): a card
  number (13-19 digits passing the Luhn check, wherever they stand among other digits), a
  password, PIN or security code, an identity document or bank account number, health data,
  religion, ethnicity, sexuality or political opinions (the special categories of GDPR art. 9);
- no instruction about how requests are handled ("always approve my refunds"): a fact
  describes the customer, it never changes the policy;
- a refund method is a payment method id the system of record lists for the customer;
- an open complaint names one of the customer's orders;
- delivery instructions may name an address only if it is one the system of record holds
  for the customer (a house number followed by a street word or by capitalised words);
- a preferred language is a language's name, with at most a region in brackets.

Pure: imported inside the workflow sandbox.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

from workflows.domain.memory.facts import MAX_VALUE_CHARS, FactKind
from workflows.domain.user_text import INVISIBLE, control_problem, visible_text

_FULL_WIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
"""Full-width ASCII (what a CJK keyboard types: ``４１１１``, ``ｐａｓｓｗｏｒｄ``) to ASCII, written out
rather than read from ``unicodedata`` at run time, as ``user_text.INVISIBLE`` is."""
_DIGIT_RUN = re.compile(r"[0-9](?:[ .,/_-]?[0-9])+")
"""Digits with at most one separator between each two (space, dot, comma, slash, dash, underscore)."""
_SECRET = re.compile(r"\b(pass[ -]?(?:words?|wd|codes?|phrases?)|pwd|pins?|cvv2?|cvc|security (?:codes?|questions?)|"
                     r"one[- ]time codes?|otp|2fa|login|credentials?|maiden names?|secret answers?)\b",
                     re.IGNORECASE | re.ASCII)
_IDENTITY = re.compile(r"\b(social security|ssn|passport|driver'?s? licen[cs]e|national (?:id|insurance)|tax (?:id|number)|"
                       r"iban|bank account|account number|routing number|sort code|swift)\b|\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b|"
                       r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){3,7}\b", re.IGNORECASE | re.ASCII)
_HEALTH = re.compile(r"\b(diagnos\w*|ill|illness\w*|sick\w*|disease\w*|pregnan\w*|medication\w*|medicine\w*|medical\w*|"
                     r"disabilit\w*|disabled|allerg\w*|hiv|aids|cancer|chemo\w*|diabet\w*|insulin|dialysis|asthma\w*|"
                     r"epilep\w*|seizures?|stroke|heart (?:condition|attack|disease)|pacemaker|deaf\w*|blind\w*|"
                     r"hard of hearing|visually impaired|autis\w*|adhd|dementia|alzheimer\w*|arthritis|migraines?|"
                     r"hospital\w*|clinic|doctors?|nurses?|therap\w*|surger\w*|injur\w*|prescription\w*|"
                     r"mental health|depress\w*|anxiety|wheelchair|crutches)\b", re.IGNORECASE | re.ASCII)
_SPECIAL = re.compile(r"\b(religio\w*|christian\w*|catholic\w*|muslim\w*|islam\w*|jew\w*|hindu\w*|buddhis\w*|sikh\w*|"
                      r"atheis\w*|church|mosque|synagogue|ethnic\w*|race|sexual\w*|gay|lesbian|bisexual|transgender|"
                      r"political|trade union)\b",
                      re.IGNORECASE | re.ASCII)
"""The special categories of personal data (GDPR art. 9) other than health."""
_INSTRUCTION = re.compile(r"\b(approv\w*|refund\w*|polic(y|ies)|confirm\w*|verif\w*|authori[sz]\w*|authenticat\w*|"
                          r"identif\w*|identity|zip ?codes?|ignore|disregard|override|bypass|skip|waive\w*|fees?|"
                          r"discounts?|compensat\w*|goodwill|credits?|free of charge|exceptions?|priority|vip|"
                          r"supervisor|escalat\w*|rules?|guidance|instructions? to you|system prompt|say yes|"
                          r"accept (?:any|all|every)\w*|(?:any|all|every) requests?|(?:don'?t|do not|never) ask)\b",
                          re.IGNORECASE | re.ASCII)
_STREET = (r"street|st|avenue|ave|road|rd|lane|ln|drive|dr|boulevard|blvd|way|court|ct|place|pl|terrace|circle|square|"
           r"sq|parkway|pkwy|highway|hwy|crescent|cres|loop|close|row|mews|gardens|grove|hill|park|walk|trail|alley|"
           r"path|plaza|quay|wharf|crossing|green|vale|view|heights|rise|gate|yard|bend|pike|route|cove|point|ridge|"
           r"manor|meadows?|fields?|run")
_ADDRESS = re.compile(r"\b[0-9]{1,6}[a-z]?,?\s+(?:[A-Za-z0-9.'-]+\s+){0,4}(?:" + _STREET + r")\b\.?"
                      r"|\b[0-9]{1,6}[a-z]?,?\s+[A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,3}\b", re.ASCII)
"""A street address: a house number, then words ending in a street word, or capitalised words."""
_LANGUAGE = re.compile(r"^[A-Za-z][A-Za-z -]{1,29}(?: \([A-Za-z -]{2,20}\))?$")
_INVISIBLE = re.compile(f"[{INVISIBLE}]")


def _plain(text: str) -> str:
    """``text`` as a reader sees it (``visible_text``), full-width ASCII made ASCII."""
    return visible_text(text).translate(_FULL_WIDTH)


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def holds_card_number(text: str) -> bool:
    """Whether ``text`` holds a payment card number: 13-19 consecutive digits (full-width too; a
    space, dot, comma, slash, dash or underscore between them) that pass the Luhn check,
    wherever they stand in a longer run (an expiry, a security code or a flat number beside it)."""
    for run in _DIGIT_RUN.findall(_plain(text)):
        digits = re.sub(r"[^0-9]", "", run)
        for length in range(13, min(19, len(digits)) + 1):
            if any(_luhn(digits[start:start + length]) for start in range(len(digits) - length + 1)):
                return True
    return False


def sensitive_problem(text: str) -> Optional[str]:
    """The reason ``text`` may never be remembered (a sensitive category), or None."""
    plain = _plain(text)
    if _IDENTITY.search(plain):
        return "identity document and bank account numbers are never remembered"
    if holds_card_number(plain):
        return "card numbers are never remembered"
    if _SECRET.search(plain):
        return "passwords, PINs and security codes are never remembered"
    if _HEALTH.search(plain):
        return "health information is never remembered"
    if _SPECIAL.search(plain):
        return "religion, ethnicity, sexuality and political opinions are never remembered"
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
    shown = _plain(value).strip()
    if not shown:
        return "there is nothing to remember"
    if len(shown) > MAX_VALUE_CHARS:
        return f"what to remember is at most {MAX_VALUE_CHARS} characters"
    control = control_problem(value, "what to remember")
    if control is not None:
        return control
    if _INVISIBLE.search(value):
        return "what to remember holds invisible characters; send it as plain text"
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
