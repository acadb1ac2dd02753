"""Ctrl-C (or SIGTERM) in the first second of any `statekeeper` command, while Python is still
importing the command line (about 1.5 s on a loaded 2-core machine, before any command
runs): the command stops quietly with status 130, as it does later on. Before, the user got
a screenful of the import machinery's traceback ending in ``KeyboardInterrupt`` and the
process died of the signal (status -2). Found by a hostile review of the CLI. Real
processes: the console script and ``python -m starter.cli.app``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(Path(sys.executable).with_name("statekeeper"))


@pytest.mark.parametrize("launcher", [[SCRIPT], [sys.executable, "-m", "starter.cli.app"]], ids=["script", "module"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_while_the_command_line_loads_stops_it_quietly(tmp_path, launcher, signum):
    env = dict(os.environ, STATEKEEPER_DATA_DIR=str(tmp_path), STATEKEEPER_DEV_STATE_FILE=str(tmp_path / "dev.json"))
    proc = subprocess.Popen([*launcher, "keys", "list"], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    started = time.monotonic()
    time.sleep(0.5)  # the interpreter is up, the command line's imports are not done
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - started < 60
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert "API keys" not in out  # stopped before the command ran, not after it
