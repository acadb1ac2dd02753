"""Record the histories and state fixtures of a release: real conversations and refunds run
on a real Temporal dev server with a real worker (SQLite, the offline stand-in model or a
scripted one), saved under ``tests/histories/<version>/``:

    <name>.json          one workflow run's history (``WorkflowHistory.to_json``, the format of
                         ``temporal workflow show --output json``), replayed in CI by
                         tests/workflows/test_history_replay.py with the current code;
                         ``<name>`` is ``<scenario>-<workflow id>-run<n>``, n counting the
                         workflow's runs (continue-as-new) from 0
    workflow_ids.json    each history's workflow id (ids derived from it, such as approval
                         ids, replay only under the same workflow id)
    states/<name>.json   a ``ConversationState`` as the query returned it, loaded into the
                         current schema by the migration tests

    python -m tests.histories.record --out tests/histories/v1.0.0             # a new release
    python -m tests.histories.record --out tests/histories/v1.0.0 --replace   # record it again

The release procedure (docs/releasing.md) runs it at the release commit. Every scenario runs in
order, each with its own database and task queue, and the workflow ids and file names come from
the scenarios alone, so two recordings of the same code hold the same files. The recording is
written to a hidden folder beside the target, replayed there with the current code, and only
then moved into place (``--replace`` removes the old folder at that moment): a failed recording
leaves the target as it was.

The scenarios cover the command sequences a change is most likely to disturb: reads, a
confirmed return and cancel with their refund children, a supervisor's approval, a cancel
with rollback of a reversible write, continue-as-new, a standalone refund, and an operator's
cancel (more in ``tests.histories.scenarios_more``).
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

from temporalio.client import Client, WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from settings import Settings
from tests.conftest import temporal_cli
from tests.histories.scenarios_more import MORE_SCENARIOS
from tests.policy_fixtures import CUSTOMER, DELIVERED, EMAIL, PENDING
from tests.workflow_harness import NO_APPROVALS, Script, call, reply, running_worker, until
from starter.runtime.connection import data_converter
from starter.dev.server import DEV_SERVER_STARTUP, dynamic_config_args
from starter.runtime.worker import workflow_runner
from workflows.domain.policy.approvals import ApprovalPolicy
from workflows.domain.contracts import CancelRequest, SupportInput
from workflows.options import SEARCH_ATTRIBUTES
from workflows.refund.standalone import RefundRequest
from workflows.refund.workflow import RefundWorkflow
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id

HERE = Path(__file__).resolve().parent
NEW_ADDRESS = dict(address1="1 New Street", address2="", city="Austin", state="TX", country="USA", zip="78701")
Save = Callable[[str, Any], None]


async def _histories(client: Client, workflow_id: str) -> list[tuple[str, str]]:
    """Every run of ``workflow_id``, oldest first, as (run id, history JSON)."""
    runs = [wf async for wf in client.list_workflows(f"WorkflowId = '{workflow_id}'")]
    runs.sort(key=lambda wf: wf.start_time)
    return [(wf.run_id, (await client.get_workflow_handle(workflow_id, run_id=wf.run_id).fetch_history()).to_json())
            for wf in runs]


async def returns_and_cancels(env: WorkflowEnvironment, settings: Settings, save: Save) -> list[str]:
    async with running_worker(env, settings) as (client, backend):
        cid = "v-return-cancel"
        await client.start_conversation(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        save("authenticated", await client.state(cid))
        await client.send_message(cid, f"Please return everything from {DELIVERED}")
        save("awaiting_confirmation", await client.state(cid))
        await client.send_message(cid, "yes")
        await client.send_message(cid, f"cancel {PENDING}, ordered by mistake")
        await client.send_message(cid, "yes")
        save("two_writes_done", await client.state(cid))
        await client.cancel(cid, "done")
        outcome = await client.outcome(cid)
        save("cancelled", outcome.state)
        return [support_workflow_id(cid)] + [op.child_workflow_id for op in outcome.state.completed_operations
                                             if op.child_workflow_id]


async def approval(env: WorkflowEnvironment, settings: Settings, save: Save) -> list[str]:
    async with running_worker(env, settings, approvals=ApprovalPolicy()) as (client, backend):
        cid = "v-approval"
        await client.start_conversation(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        told = await client.send_message(cid, "yes")
        save("awaiting_approval", await client.state(cid))
        await client.decide_approval(told.awaiting_approval, "approve", "sup-ana", note="checked")
        await until(lambda: _told(client, cid, "A supervisor approved"), "the approved write")
        await client.send_message(cid, "Thanks, that's all")
        state = (await client.outcome(cid)).state  # "that's all" ends the conversation
        save("ended", state)
        return [support_workflow_id(cid)] + [op.child_workflow_id for op in state.completed_operations
                                             if op.child_workflow_id]


async def _told(client, cid: str, prefix: str) -> bool:
    return (await client.state(cid)).recent_turns[-1].text.startswith(prefix)


async def rollback(env: WorkflowEnvironment, settings: Settings, save: Save) -> list[str]:
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?"),
                     call("get_user_details", user_id=CUSTOMER),
                     call("modify_user_address", user_id=CUSTOMER, **NEW_ADDRESS), reply("Your address is changed.")])
    async with running_worker(env, settings, brain=script) as (client, backend):
        cid = "v-rollback"
        await client.start_conversation(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        await client.send_message(cid, "Please change my default address to 1 New Street, Austin TX 78701")
        await client.send_message(cid, "yes")
        handle = env.client.get_workflow_handle(support_workflow_id(cid))
        await handle.signal(SupportWorkflow.cancel, CancelRequest(reason="the customer changed their mind",
                                                                  rollback=True))
        save("rolled_back", (await client.outcome(cid)).state)
        return [support_workflow_id(cid)]


async def continue_as_new(env: WorkflowEnvironment, settings: Settings, save: Save) -> list[str]:
    async with running_worker(env, settings) as (client, backend):
        cid = "v-can"
        await env.client.start_workflow(SupportWorkflow.run, SupportInput(conversation_id=cid, max_turns_per_run=2,
                                                                          approvals=NO_APPROVALS),
                                        id=support_workflow_id(cid), task_queue=settings.task_queue)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        await client.send_message(cid, f"What is the status of order {PENDING}?")
        await client.send_message(cid, f"Please cancel order {PENDING}, no longer needed")
        await client.send_message(cid, "yes")
        state = await client.state(cid)
        save("after_continue_as_new", state)
        await client.cancel(cid, "done")
        await client.outcome(cid)
        return [support_workflow_id(cid)] + [op.child_workflow_id for op in state.completed_operations
                                             if op.child_workflow_id]


async def standalone_refund(env: WorkflowEnvironment, settings: Settings, save: Save) -> list[str]:
    async with running_worker(env, settings) as (client, backend):
        status = await client.request_refund(RefundRequest(request_id="v-req-1", order_id=PENDING,
                                                           operation="cancel", reason="no longer needed"))
        await env.client.get_workflow_handle(status.refund_id).result()
        return [status.refund_id]


SCENARIOS = [returns_and_cancels, approval, rollback, continue_as_new, standalone_refund, *MORE_SCENARIOS]


VERSION = re.compile(r"v[0-9]+\.[0-9]+\.[0-9]+")
"""A release's folder name: ``vX.Y.Z``."""


async def record_into(out: Path) -> None:
    """Run every scenario on a fresh dev server and write its histories, ``workflow_ids.json``
    and ``states/`` into the empty folder ``out``. Raises when a scenario fails or records
    no history."""
    (out / "states").mkdir(parents=True)
    env = await WorkflowEnvironment.start_local(
        dev_server_startup_timeout=DEV_SERVER_STARTUP,
        dev_server_existing_path=temporal_cli(),
        data_converter=data_converter(),
        search_attributes=list(SEARCH_ATTRIBUTES), dev_server_log_level="error",
        dev_server_extra_args=dynamic_config_args())  # as `statekeeper dev` runs it
    index: dict[str, str] = {}
    try:
        for scenario in SCENARIOS:
            with tempfile.TemporaryDirectory() as tmp:
                settings = Settings(database_url=f"sqlite:///{tmp}/statekeeper.sqlite", data_dir=Path(tmp),
                                    task_queue=f"rec-{uuid.uuid4().hex[:8]}", anthropic_api_key=None)

                def save(name: str, state: Any, prefix: str = scenario.__name__) -> None:
                    (out / "states" / f"{prefix}-{name}.json").write_text(
                        json.dumps(state.model_dump(mode="json"), indent=1, sort_keys=True) + "\n")

                workflow_ids = await scenario(env, settings, save)
                recorded = 0
                for workflow_id in workflow_ids:
                    for n, (_, history) in enumerate(await _histories(env.client, workflow_id)):
                        name = f"{scenario.__name__}-{workflow_id.replace('#', '').replace('~', '-')}-run{n}.json"
                        if name in index:
                            raise RuntimeError(f"{scenario.__name__}: {name} recorded twice")
                        (out / name).write_text(history)
                        index[name] = workflow_id
                        recorded += 1
                if not recorded:
                    raise RuntimeError(f"{scenario.__name__} recorded no history")
                print(f"recorded {scenario.__name__}: {len(workflow_ids)} workflow(s), {recorded} run(s)")
    finally:
        await env.shutdown()
    (out / "workflow_ids.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")


async def replay_all(folder: Path) -> None:
    """Replay every history in ``folder`` with the current code (as the replay test does);
    raises on the first that does not replay."""
    index = json.loads((folder / "workflow_ids.json").read_text())
    replayer = Replayer(workflows=[SupportWorkflow, RefundWorkflow], data_converter=data_converter(),
                        workflow_runner=workflow_runner())
    for name, workflow_id in sorted(index.items()):
        history = WorkflowHistory.from_json(workflow_id, (folder / name).read_text())
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        if result.replay_failure is not None:
            raise RuntimeError(f"{name} does not replay with the code that recorded it: {result.replay_failure}")


async def record(out: Path, replace: bool = False) -> Path:
    """Record into ``out`` (``tests/histories/vX.Y.Z``) through a hidden folder beside it (see
    the module docstring); ``replace``: an existing ``out`` is replaced, else refused."""
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        await record_into(work / "recording")
        await replay_all(work / "recording")
        if out.exists():
            if not replace:
                raise FileExistsError(f"{out} appeared while recording")
            shutil.rmtree(out)
        (work / "recording").rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


USAGE = ("usage: python -m tests.histories.record --out tests/histories/vX.Y.Z [--replace]\n"
         "  records the histories of the code checked out into that folder (a new release's;\n"
         "  --replace records an existing one again)")


def target(out: str) -> Optional[Path]:
    """The folder ``--out`` names when it is ``tests/histories/vX.Y.Z`` (relative to the working
    directory or absolute), else None."""
    path = Path(out).resolve()
    return path if path.parent == HERE and VERSION.fullmatch(path.name) else None


def _parse(argv: list[str]) -> Optional[tuple[str, bool]]:
    """(the ``--out`` folder, ``--replace``) from ``argv``; None when it is anything else."""
    replace = argv.count("--replace")
    rest = [arg for arg in argv if arg != "--replace"]
    if replace > 1:
        return None
    if len(rest) == 2 and rest[0] == "--out":
        return rest[1], bool(replace)
    if len(rest) == 1 and rest[0].startswith("--out=") and len(rest[0]) > len("--out="):
        return rest[0].removeprefix("--out="), bool(replace)
    return None


def main(argv: list[str]) -> int:
    """The command (``USAGE``). ``--help`` prints it; anything but ``--out`` naming a
    ``tests/histories/vX.Y.Z`` folder (and ``--replace``) records nothing, nor does an
    existing folder without ``--replace``."""
    if argv in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    parsed = _parse(argv)
    out = target(parsed[0]) if parsed else None
    if parsed is None or out is None:
        print(USAGE, file=sys.stderr)
        return 2
    if out.exists() and not parsed[1]:
        print(f"tests/histories/{out.name}/ already exists: a release's histories are recorded once "
              "(--replace records them again)", file=sys.stderr)
        return 2
    print(asyncio.run(record(out, replace=parsed[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
