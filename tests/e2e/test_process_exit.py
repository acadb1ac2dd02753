"""Commands end without the interpreter's teardown (``starter.runtime.process_exit``): the SDK's
native threads can call into a finalizing interpreter and abort it (open upstream:
github.com/temporalio/sdk-python/issues/300), e.g. a ``statekeeper chat`` that printed every
reply, then died with "Fatal Python error: PyGILState_Release ... finalizing" and status -6.
Real processes, a real Temporal dev server."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import entry_points
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CLIENT_SCRIPT = textwrap.dedent("""
    import asyncio, sys
    from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
    from temporalio.client import Client
    from starter.runtime.process_exit import run_and_exit

    async def main():
        client = await Client.connect(sys.argv[1])
        # many RPCs in flight just before the end: the pattern that crashes 6 in 60 plain runs
        await asyncio.gather(*[client.workflow_service.get_system_info(GetSystemInfoRequest()) for _ in range(20)])
        print("done", flush=True)

    run_and_exit(lambda: asyncio.run(main()))
""")


def _python(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_short_lived_client_processes_all_end_with_status_0(temporal_env):
    """48 short client processes, 8 at a time. Ended by the interpreter's teardown, 6 of 60
    such runs aborted or segfaulted on this machine (status -6/-11); through ``run_and_exit``,
    none of 60."""
    address = temporal_env.client.service_client.config.target_host
    with ThreadPoolExecutor(8) as pool:
        runs = list(pool.map(lambda _: _python(CLIENT_SCRIPT, address), range(48)))
    failed = [(run.returncode, run.stderr[-300:]) for run in runs if run.returncode != 0 or run.stdout != "done\n"]
    assert failed == []


def test_exit_handlers_buffered_output_and_logs_are_kept():
    done = _python(textwrap.dedent("""
        import atexit, logging, sys
        from starter.runtime.process_exit import run_and_exit
        logging.basicConfig(stream=sys.stderr, format="%(message)s")
        atexit.register(lambda: print("exit handler ran"))
        sys.stdout.write("buffered, no newline; ")
        logging.getLogger("t").warning("a log line")
        run_and_exit(lambda: sys.exit(3))
    """))
    assert done.returncode == 3
    assert done.stdout == "buffered, no newline; exit handler ran\n"
    assert "a log line" in done.stderr


def test_statuses_follow_the_interpreters_rules():
    message = _python("from starter.runtime.process_exit import run_and_exit; run_and_exit(lambda: exit('no such order'))")
    assert (message.returncode, message.stderr) == (1, "no such order\n")
    clean = _python("from starter.runtime.process_exit import run_and_exit; run_and_exit(lambda: None)")
    assert (clean.returncode, clean.stderr) == (0, "")
    crashed = _python("from starter.runtime.process_exit import run_and_exit; run_and_exit(lambda: 1 / 0)")
    assert crashed.returncode == 1 and crashed.stderr.rstrip().endswith("ZeroDivisionError: division by zero")


def test_the_statekeeper_command_and_python_m_starter_cli_end_through_it():
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "statekeeper"]
    assert script.value == "starter.cli.app:main"
    source = (ROOT / "starter" / "cli" / "app.py").read_text()
    assert source.rstrip().endswith('if __name__ == "__main__":\n    main()')
    bad = subprocess.run([sys.executable, "-m", "starter.cli", "no-such-command"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "No such command" in bad.stderr  # click's usage error status kept


SAYS = "from starter.runtime.process_exit import run_and_exit; run_and_exit(lambda: print('the state as JSON'))"


def _shell(line: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as users run it: output buffered
    return subprocess.run(["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_output_that_cannot_be_written_is_a_failure_said_on_stderr():
    full = _shell(f'{sys.executable} -c "{SAYS}" > /dev/full')  # a full disk
    assert full.returncode == 120  # the interpreter's status for output lost at exit, not 0
    assert "output not written" in full.stderr and "No space left on device" in full.stderr


def test_a_reader_that_went_away_fails_the_status_without_a_message():
    gone = _shell(f'{sys.executable} -c "import time; time.sleep(0.3); {SAYS}" | true; echo "status=${{PIPESTATUS[0]}}"')
    assert gone.stdout == "status=120\n" and gone.stderr == ""


def test_closed_stdout_or_stderr_still_ends_cleanly():
    for closed in (">&-", "2>&-"):
        done = _shell(f'{sys.executable} -c "{SAYS}" {closed}; echo "status=$?"')
        assert done.stdout.endswith("status=0\n"), (closed, done.stdout, done.stderr)  # not 1 with a traceback


def test_an_uncaught_exception_goes_through_the_installed_hook():
    hooked = _python(textwrap.dedent("""
        import sys
        from starter.runtime.process_exit import run_and_exit
        sys.excepthook = lambda kind, value, tb: print(f"hook: {kind.__name__}: {value}", file=sys.stderr)
        run_and_exit(lambda: 1 / 0)
    """))
    assert (hooked.returncode, hooked.stderr) == (1, "hook: ZeroDivisionError: division by zero\n")


def test_a_worker_ends_without_the_exit_handlers():
    done = _python(textwrap.dedent("""
        import atexit, sys
        from starter.runtime.process_exit import exit_now
        atexit.register(lambda: print("exit handler ran"))
        print("stopped", flush=False)
        exit_now(0, exit_handlers=False)
    """))
    assert (done.returncode, done.stdout) == (0, "stopped\n")  # output flushed, the handler skipped
