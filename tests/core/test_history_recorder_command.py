"""``python -m tests.histories.record --out tests/histories/vX.Y.Z`` records a release's
histories only into a release folder of ``tests/histories`` (the replay test reads every
``v*`` folder there as a release), and into an existing one only with ``--replace``; anything
else, ``--help`` included, prints the usage and records nothing. A recording is moved into
place only once it is complete and replays."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.histories import record as recorder


ROOT = recorder.HERE.parent.parent
"""The project's root, where the command runs (``--out`` is relative to it)."""


@pytest.fixture
def never_records(monkeypatch):
    async def fail(out, replace=False):
        raise AssertionError(f"recorded {out!r}")
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(recorder, "record", fail)


@pytest.mark.parametrize("argv, code", [
    (["--help"], 0), (["-h"], 0), ([], 2), (["v0.2.0"], 2), (["--out"], 2), (["--out", "latest"], 2),
    (["--out", "tests/histories/latest"], 2), (["--out", "/tmp/v0.2.0"], 2), (["--out", "tests/v0.2.0"], 2),
    (["--out", "tests/histories/v0.2.0", "extra"], 2), (["--out", "tests/histories/v0.2.0", "--replace", "--replace"], 2),
    (["--replace"], 2), (["--out", "tests/histories/v1.0.0"], 2)])
def test_only_a_new_release_folder_is_recorded(never_records, capsys, argv, code):
    assert recorder.main(argv) == code
    out, err = capsys.readouterr()
    assert "usage: python -m tests.histories.record --out tests/histories/vX.Y.Z" in out + err or "already exists" in err
    assert "Traceback" not in out + err


def test_help_creates_no_release_folder(never_records):
    recorder.main(["--help"])
    assert not (recorder.HERE / "--help").exists()


@pytest.mark.parametrize("argv, release, replace", [
    (["--out", "tests/histories/v9.8.7"], "v9.8.7", False),
    (["--out=tests/histories/v9.8.7", "--replace"], "v9.8.7", True),
    (["--replace", "--out", str(ROOT / "tests/histories/v1.0.0")], "v1.0.0", True)])
def test_a_release_folder_is_recorded_there(monkeypatch, argv, release, replace):
    called = []

    async def fake(out, replace=False):
        called.append((out, replace))
        return out
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(recorder, "record", fake)
    assert recorder.main(argv) == 0
    assert called == [(recorder.HERE / release, replace)]


def test_a_failed_recording_leaves_the_release_folder_as_it_was(monkeypatch, tmp_path):
    release = tmp_path / "v9.8.7"
    release.mkdir()
    (release / "kept.json").write_text("{}")

    async def half(out):
        out.mkdir(parents=True)
        (out / "partial.json").write_text("{}")
        raise RuntimeError("a scenario failed")
    monkeypatch.setattr(recorder, "record_into", half)
    with pytest.raises(RuntimeError):
        asyncio.run(recorder.record(release, replace=True))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v9.8.7"]  # no recording left beside it
    assert [p.name for p in release.iterdir()] == ["kept.json"]


def test_a_complete_recording_replaces_the_release_folder(monkeypatch, tmp_path):
    release = tmp_path / "v9.8.7"
    release.mkdir()
    (release / "stale.json").write_text("{}")

    async def whole(out):
        out.mkdir(parents=True)
        (out / "workflow_ids.json").write_text(json.dumps({}))

    async def replays(folder):
        assert (folder / "workflow_ids.json").exists()
    monkeypatch.setattr(recorder, "record_into", whole)
    monkeypatch.setattr(recorder, "replay_all", replays)
    assert asyncio.run(recorder.record(release, replace=True)) == release
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v9.8.7"]
    assert [p.name for p in release.iterdir()] == ["workflow_ids.json"]
