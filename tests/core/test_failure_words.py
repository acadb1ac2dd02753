"""``starter.client.failure_words.failure_kind``: what an operator reads for a failure names its kind
in words, never the exception's class (API refusals, ``replay-check`` reports)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import OperationalError
from temporalio.service import RPCError, RPCStatusCode

from starter.client.failure_words import failure_kind


class _Shape(BaseModel):
    n: int


def _validation_error() -> ValidationError:
    try:
        _Shape(n="x")  # type: ignore[arg-type]
    except ValidationError as err:
        return err
    raise AssertionError("unreachable")


@pytest.mark.parametrize("err, words", [
    (TimeoutError(), "it timed out"),
    (ConnectionRefusedError(111, "refused"), "a connection failed"),
    (RPCError("unavailable", RPCStatusCode.UNAVAILABLE, b""), "Temporal did not answer"),
    (OperationalError("SELECT 1", {}, Exception("down")), "the database failed"),
    (_validation_error(), "the data did not decode"),
    (PermissionError(13, "denied"), "the operating system refused"),
    (RuntimeError("boom"), "an unexpected error"),
])
def test_each_kind_of_failure_is_worded_without_its_class_name(err, words):
    said = failure_kind(err)
    assert said == words
    assert type(err).__name__ not in said
