"""``python -m tests.histories.record`` records a release's histories only for one new
``vX.Y.Z``: ``--help`` is not taken for a version (which would run every scenario into
``tests/histories/--help/``, which the replay test would then read as a release)."""

from __future__ import annotations

import pytest

from tests.histories import record as recorder


@pytest.fixture
def never_records(monkeypatch):
    async def fail(version):
        raise AssertionError(f"recorded {version!r}")
    monkeypatch.setattr(recorder, "record", fail)


@pytest.mark.parametrize("argv, code", [(["--help"], 0), (["-h"], 0), ([], 2), (["latest"], 2),
                                         (["v0.2.0", "extra"], 2), (["v0.1.0"], 2)])
def test_only_one_new_version_is_recorded(never_records, capsys, argv, code):
    assert recorder.main(argv) == code
    out, err = capsys.readouterr()
    assert "usage: python -m tests.histories.record VERSION" in out + err or "already exists" in err
    assert "Traceback" not in out + err


def test_help_creates_no_release_folder(never_records):
    recorder.main(["--help"])
    assert not (recorder.HERE / "--help").exists()
