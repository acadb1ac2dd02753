"""What backend services import: ``from starter import ...`` gives the Python client, its
refusal, the bootstrap from settings and the connection, each the same object as at its home."""

from __future__ import annotations

import pytest

import starter


def test_the_public_names_are_their_homes_objects():
    from starter.client.conversations import StatekeeperClient
    from starter.client.errors import ConversationError
    from starter.ops.bootstrap import client_for
    from starter.runtime.connection import connect

    assert starter.StatekeeperClient is StatekeeperClient
    assert starter.ConversationError is ConversationError
    assert starter.client_for is client_for
    assert starter.connect is connect
    assert set(starter.__all__) >= {"StatekeeperClient", "ConversationError", "client_for", "connect"}


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        starter.Nothing  # noqa: B018


def test_uvicorn_finds_the_app_at_starter_api():
    """``uvicorn starter.api:app`` imports ``starter.api`` and takes its ``app``: the FastAPI app."""
    import importlib

    from fastapi import FastAPI

    from starter.api.application import app

    found = getattr(importlib.import_module("starter.api"), "app")
    assert isinstance(found, FastAPI) and found is app
