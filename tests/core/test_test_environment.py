"""The test processes ignore the developer's shell settings: the "beside another dev" recipe
of docs/index.md exports ``STATEKEEPER_*`` ports, an address and a dev state file; the core
tests of ``starter.dev.state`` must not see its UI port."""

from __future__ import annotations

import os

from settings import Settings
from tests.conftest import _drop_deployment_settings


def test_the_recipes_settings_are_dropped_and_the_tests_own_switches_kept():
    shell = {"STATEKEEPER_TEMPORAL_ADDRESS": "127.0.0.1:7733", "STATEKEEPER_UI_PORT": "8733",
             "STATEKEEPER_API_PORT": "8735", "STATEKEEPER_CODEC_PORT": "8734", "STATEKEEPER_SERVICES_PORT": "8741",
             "STATEKEEPER_DEV_STATE_FILE": "/tmp/dev.json", "STATEKEEPER_TEST_POSTGRES_URL": "postgresql://x/y",
             "STATEKEEPER_SKIP_BROWSER": "1", "ANTHROPIC_API_KEY": "", "PATH": "/bin"}
    dropped = _drop_deployment_settings(shell)
    assert dropped == sorted(["STATEKEEPER_API_PORT", "STATEKEEPER_CODEC_PORT", "STATEKEEPER_DEV_STATE_FILE",
                              "STATEKEEPER_SERVICES_PORT", "STATEKEEPER_TEMPORAL_ADDRESS", "STATEKEEPER_UI_PORT"])
    assert shell == {"STATEKEEPER_TEST_POSTGRES_URL": "postgresql://x/y", "STATEKEEPER_SKIP_BROWSER": "1",
                     "ANTHROPIC_API_KEY": "", "PATH": "/bin"}


def test_this_process_reads_the_default_ports():
    assert "STATEKEEPER_UI_PORT" not in os.environ
    defaults = Settings()
    assert (defaults.ui_port, defaults.api_port, defaults.temporal_address) == (8233, 8000, "127.0.0.1:7233")
