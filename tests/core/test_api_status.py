"""The HTTP API's refusal statuses: each ``ConversationError`` kind maps to one status
code (422, 409, 404, 503, 504), whatever the reason text says.

The API itself, over HTTP against a real server and worker, is tests/e2e/test_api.py.
"""

from __future__ import annotations

import pytest

from starter.api.application import status_for
from starter.client.conversations import ConversationError


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("invalid_message", 422), ("invalid", 422), ("finished", 409), ("conflict", 409), ("approval_refused", 409),
     ("not_found", 404), ("no_worker", 503), ("unavailable", 503), ("timeout", 504), ("surprise", 503)],
)
def test_status_for_kind(kind: str, expected: int) -> None:
    assert status_for(ConversationError("any reason text: does not exist", kind)) == expected
