"""Record the histories and state fixtures of a release: real conversations and refunds run
on a real Temporal dev server with a real worker (SQLite, the offline stand-in model or a
scripted one), saved under ``tests/histories/<version>/``:

    <name>.json          one workflow run's history (``WorkflowHistory.to_json``, the format of
                         ``temporal workflow show --output json``), replayed in CI by
                         tests/workflows/test_history_replay.py with the current code
    workflow_ids.json    each history's workflow id (ids derived from it, such as approval
                         ids, replay only under the same workflow id)
    states/<name>.json   a ``ConversationState`` as the query returned it, loaded into the
                         current schema by the migration tests

    python -m tests.histories.record v0.2.0      # part of the release procedure (docs/releasing.md)

The scenarios cover the command sequences a change is most likely to disturb: reads, a
confirmed return and cancel with their refund children, a supervisor's approval, a cancel
with rollback of a reversible write, continue-as-new, a standalone refund, and an operator's
cancel.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from settings import Settings
from tests.conftest import temporal_cli
from tests.histories.scenarios_more import MORE_SCENARIOS
from tests.policy_fixtures import CUSTOMER, DELIVERED, EMAIL, PENDING
from tests.workflow_harness import NO_APPROVALS, Script, call, reply, running_worker, until
from starter.runtime.connection import data_converter
from starter.dev.server import DEV_SERVER_STARTUP
from workflows.domain.policy.approvals import ApprovalPolicy
from workflows.domain.contracts import CancelRequest, SupportInput
from workflows.options import SEARCH_ATTRIBUTES
from workflows.refund.standalone import RefundRequest
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


async def record(version: str) -> Path:
    """Run every scenario on a fresh dev server and write ``tests/histories/<version>/``."""
    out = HERE / version
    (out / "states").mkdir(parents=True, exist_ok=True)
    env = await WorkflowEnvironment.start_local(
        dev_server_startup_timeout=DEV_SERVER_STARTUP,
        dev_server_existing_path=temporal_cli(),
        data_converter=data_converter(),
        search_attributes=list(SEARCH_ATTRIBUTES), dev_server_log_level="error")
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
                for workflow_id in workflow_ids:
                    for n, (_, history) in enumerate(await _histories(env.client, workflow_id)):
                        name = f"{scenario.__name__}-{workflow_id.replace('#', '').replace('~', '-')}-run{n}.json"
                        (out / name).write_text(history)
                        index[name] = workflow_id
                print(f"recorded {scenario.__name__}: {len(workflow_ids)} workflow(s)")
    finally:
        await env.shutdown()
    (out / "workflow_ids.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return out


USAGE = "usage: python -m tests.histories.record VERSION   (a new release, e.g. v0.2.0)"


def main(argv: list[str]) -> int:
    """The command: ``--help`` or anything but one new ``vX.Y.Z`` records nothing (``--help``
    was taken for a version and recorded every scenario into ``tests/histories/--help/``, which
    the replay test would then have read as a release)."""
    if argv in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    if len(argv) != 1 or not re.fullmatch(r"v[0-9]+\.[0-9]+\.[0-9]+", argv[0], re.ASCII):
        print(USAGE, file=sys.stderr)
        return 2
    if (HERE / argv[0]).exists():
        print(f"tests/histories/{argv[0]}/ already exists: a release's histories are recorded once", file=sys.stderr)
        return 2
    print(asyncio.run(record(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
