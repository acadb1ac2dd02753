"""Operators resolve an escalated unknown outcome through the HTTP API and the CLI, and the
CLI's ``replay-check`` and ``resume`` refuse such a run. Real Temporal
server, worker, retail system, API with keys; the write fails as ``OutcomeUnknown`` at the
tool port (``tests.faults.UnknownWrites``), or applies and cannot be seen until after the
escalation (``AppliedButUnseen``: a ``not_applied`` resolution is refused then).
"""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest
from typer.testing import CliRunner

from starter.api.application import create_app
from starter.api.auth import access_from_settings
from starter.cli.app import app
from starter.client.conversations import ConversationError
from activities.store.api_keys import KeyStore, Role
from starter.ops.replay_check import Systems
from starter.ops.resolution_evidence import LedgerEvidence
from tests.faults import AppliedButUnseen, UnknownWrites
from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.workflow_harness import ListBrain, call, running_worker

TOOL = "modify_pending_order_address"
ADDRESS = dict(order_id=PENDING, address1="1 Replay Road", address2="", city="Austin", state="TX", country="USA",
               zip="78701")


def _brain() -> ListBrain:
    return ListBrain([call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER),
                      call("get_order_details", order_id=PENDING), call(TOOL, **ADDRESS)])


async def _escalated(client, prefix: str) -> tuple[str, str]:
    """A conversation whose confirmed address change's outcome is unknown: (id, its step id)."""
    cid = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await client.start_conversation(cid)
    assert (await client.send_message(cid, f"my email is {EMAIL}, ship {PENDING} to Austin")).awaiting_confirmation
    assert (await client.send_message(cid, "yes")).status == "escalated"
    [step] = [s for s in (await client.state(cid)).steps if s.status.value == "unknown"]
    return cid, step.step_id


async def test_an_operator_key_resolves_over_http_and_bad_requests_change_nothing(temporal_env, settings):
    keys = KeyStore(settings.resolved_journal_url(), settings.api_key_hmac_secret())
    _, operator = keys.create("default", Role.OPERATOR, label="ops")
    _, service = keys.create("default", Role.SERVICE, label="backend")
    access = access_from_settings(settings, "127.0.0.1")
    async with running_worker(temporal_env, settings, brain=_brain(), wrap_port=UnknownWrites) as (client, _):
        cid, step_id = await _escalated(client, "api-resolve")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(lambda: client, access=access)),
                                     base_url="http://statekeeper.test", timeout=60.0) as http:
            def post(conversation: str, who: str, **body):
                fields = {"step_id": step_id, "outcome": "not_applied", "operator": "op-7",
                          "note": "no such change in the order system", **body}
                return http.post(f"/conversations/{conversation}/resolutions", json=fields,
                                 headers={"Authorization": f"Bearer {who}"})

            refusals = [(await post(cid, service), 403, "may not resolve an unknown outcome"),
                        (await post("no-such-conversation", operator), 404, "does not exist"),
                        (await post(cid, operator, step_id=f"{cid}.t99"), 409, "has no step"),
                        (await post(cid, operator, outcome="maybe"), 422, ""),
                        (await post(cid, operator, operator="two words"), 422, ""),
                        # a note that reads differently in the Web UI than in the log
                        (await post(cid, operator, note="checked: \u202eno change"), 422, "bidirectional text control"),
                        (await post(cid, operator, note="checked\u2028applied"), 422, "line separator")]
            for response, code, words in refusals:
                assert response.status_code == code and words in response.json()["detail"], response.text
            intact = (await http.get(f"/conversations/{cid}", headers={"Authorization": f"Bearer {operator}"})).json()
            assert intact["status"] == "escalated" and intact["resolutions"] == []

            done = await post(cid, operator)
            assert done.status_code == 200, done.text
            body = done.json()
            assert (body["outcome"], body["operator"]) == ("not_applied", "op-7")
            assert body["actor"].startswith("key:") and "did not go through" in body["told"]
            again = await post(cid, operator, outcome="applied")
            assert again.status_code == 409 and "already resolved as not_applied by op-7" in again.json()["detail"]

            state = (await http.get(f"/conversations/{cid}", headers={"Authorization": f"Bearer {operator}"})).json()
            step = next(s for s in state["steps"] if s["step_id"] == step_id)
            assert state["status"] == "active" and step["status"] == "failed"
            assert step["error"] == "not applied, checked by operator op-7: no such change in the order system"
            assert [r["actor"] for r in state["resolutions"]] == [body["actor"]]
            told = await http.post(f"/conversations/{cid}/messages", json={"text": "so what now?"},
                                   headers={"Authorization": f"Bearer {service}"})
            assert told.status_code == 200 and told.json()["text"].startswith(body["told"])


def _cli(env: dict, *args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "300", **env})


async def test_the_cli_refuses_to_resume_an_unknown_outcome_and_resolves_it(temporal_env, settings):
    env = {"STATEKEEPER_TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
           "STATEKEEPER_DATABASE_URL": settings.database_url, "STATEKEEPER_DATA_DIR": str(settings.data_dir),
           "STATEKEEPER_TASK_QUEUE": settings.task_queue}
    async with running_worker(temporal_env, settings, brain=_brain(), wrap_port=UnknownWrites) as (client, _):
        cid, step_id = await _escalated(client, "cli-resolve")
        handle = temporal_env.client.get_workflow_handle(f"support-{cid}")
        before = len((await handle.fetch_history()).events)

        checked = await asyncio.to_thread(_cli, env, "replay-check", cid, "--json")
        assert checked.exit_code == 1, checked.output
        report = json.loads(checked.output)
        assert report["verdict"] == "refuse" and report["input_known"] is True
        assert any("OutcomeUnknown" in r for r in report["reasons"])
        table = await asyncio.to_thread(_cli, env, "replay-check", cid)
        assert table.exit_code == 1 and "verdict: refuse" in table.output and "unknown" in table.output

        refused = await asyncio.to_thread(_cli, env, "resume", cid)
        assert refused.exit_code == 1 and "refused; nothing was changed" in refused.output, refused.output
        assert len((await handle.fetch_history()).events) == before

        wrong = await asyncio.to_thread(_cli, env, "resolve", cid, "--step", "nope", "--outcome", "applied",
                                        "--operator", "op-1", "--note", "checked")
        assert wrong.exit_code == 1 and "has no step nope" in wrong.output, wrong.output
        resolved = await asyncio.to_thread(_cli, env, "resolve", cid, "--step", step_id, "--outcome", "applied",
                                           "--operator", "op-1", "--note", "seen in the order system")
        assert resolved.exit_code == 0 and "resolved as applied by op-1" in resolved.output, resolved.output
        state = await client.state(cid)
        assert state.status.value == "active" and [(r.operator, r.actor) for r in state.resolutions] == [("op-1", "cli")]
        twice = await asyncio.to_thread(_cli, env, "resolve", cid, "--step", step_id, "--outcome", "applied",
                                        "--operator", "op-1", "--note", "again")
        assert twice.exit_code == 1 and "already resolved" in twice.output

        resumable = await asyncio.to_thread(_cli, env, "replay-check", cid, "--json")
        assert resumable.exit_code == 0 and json.loads(resumable.output)["verdict"] == "resume", resumable.output


async def test_a_not_applied_resolution_the_ledger_contradicts_is_refused(temporal_env, settings):
    """The write applied, but neither its answer nor the re-check before escalating could
    show it: the step is unknown. The ledger answers again later: resolving it as not applied
    (the user would be told a change they have did not happen) is refused, through the
    client and the CLI, and nothing changes; as applied it goes through."""
    ports = []

    def wrap(port):
        ports.append(AppliedButUnseen(port))
        return ports[-1]

    env = {"STATEKEEPER_TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
           "STATEKEEPER_DATABASE_URL": settings.database_url, "STATEKEEPER_DATA_DIR": str(settings.data_dir),
           "STATEKEEPER_TASK_QUEUE": settings.task_queue}
    async with running_worker(temporal_env, settings, brain=_brain(), wrap_port=wrap) as (client, backend):
        cid, step_id = await _escalated(client, "contradicted")
        ports[0].armed = False  # the database answers again
        assert [e["tool"] for e in backend.ledger_entries("main")] == [TOOL]  # it did apply
        client.evidence = LedgerEvidence(lambda: Systems.from_settings(settings))
        with pytest.raises(ConversationError) as refused:
            await client.resolve_outcome(cid, step_id, "not_applied", "op-2", "nothing in the order system")
        assert refused.value.kind == "resolution_refused"
        assert f"records the write of step {step_id} as applied" in str(refused.value)
        by_cli = await asyncio.to_thread(_cli, env, "resolve", cid, "--step", step_id, "--outcome", "not_applied",
                                         "--operator", "op-2", "--note", "nothing there")
        assert by_cli.exit_code == 1 and "as applied" in by_cli.output, by_cli.output
        intact = await client.state(cid)
        assert intact.status.value == "escalated" and intact.resolutions == []
        assert [s.status.value for s in intact.steps if s.step_id == step_id] == ["unknown"]
        done = await client.resolve_outcome(cid, step_id, "applied", "op-2", "the new address is on the order")
        assert done.outcome == "applied" and (await client.state(cid)).status.value == "active"


async def test_a_conversation_whose_id_starts_with_support_is_checked_against_its_own_ledger(temporal_env, settings):
    """Conversation ids may start with ``support-`` (the API's pattern allows it); the ledger
    check reads that conversation's own history, never the one named by the rest of the id
    (as if the prefix were the workflow id's), where it would find no write of the step and let
    a contradicted ``not_applied`` through."""
    ports = []

    def wrap(port):
        ports.append(AppliedButUnseen(port))
        return ports[-1]

    async with running_worker(temporal_env, settings, brain=_brain(), wrap_port=wrap) as (client, backend):
        cid, step_id = await _escalated(client, "support-named")
        ports[0].armed = False
        assert [e["tool"] for e in backend.ledger_entries("main")] == [TOOL]  # it did apply
        client.evidence = LedgerEvidence(lambda: Systems.from_settings(settings))
        with pytest.raises(ConversationError) as refused:
            await client.resolve_outcome(cid, step_id, "not_applied", "op-2", "nothing in the order system")
        assert refused.value.kind == "resolution_refused" and "as applied" in str(refused.value)
        assert (await client.state(cid)).resolutions == []


async def test_a_resolution_whose_audit_entry_cannot_be_written_is_not_made(temporal_env, settings):
    """The entry is written before the resolution: written after it, an unwritable audit log
    would give the operator a 503 with the step already resolved, and the retry's 409 ("already
    resolved") would write none either, leaving the resolution unaudited for good."""
    import sqlalchemy as sa

    from activities.store.audit import AuditLog

    keys = KeyStore(settings.resolved_journal_url(), settings.api_key_hmac_secret())
    record, operator = keys.create("default", Role.OPERATOR, label="ops")
    access = access_from_settings(settings, "127.0.0.1")
    headers = {"Authorization": f"Bearer {operator}"}
    async with running_worker(temporal_env, settings, brain=_brain(), wrap_port=UnknownWrites) as (client, _):
        cid, step_id = await _escalated(client, "api-audit")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(lambda: client, access=access)),
                                     base_url="http://statekeeper.test", timeout=60.0) as http:
            fields = {"step_id": step_id, "outcome": "not_applied", "operator": "op-7", "note": "checked the store"}
            engine = sa.create_engine(settings.resolved_journal_url())
            with engine.begin() as conn:
                conn.exec_driver_sql("ALTER TABLE audit_log RENAME TO audit_log_away")
            try:
                refused = await http.post(f"/conversations/{cid}/resolutions", json=fields, headers=headers)
            finally:
                with engine.begin() as conn:
                    conn.exec_driver_sql("ALTER TABLE audit_log_away RENAME TO audit_log")
                engine.dispose()
            assert refused.status_code == 503, refused.text
            assert (await client.state(cid)).resolutions == []  # nothing was resolved unrecorded
            done = await http.post(f"/conversations/{cid}/resolutions", json=fields, headers=headers)
            assert done.status_code == 200, done.text
    entries = AuditLog(settings.resolved_journal_url()).entries(subject=cid, action="resolve_outcome")
    assert [e.actor for e in entries] == [f"key:{record.key_id}"]
