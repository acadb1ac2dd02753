"""How a stuck run (workflow tasks failing again and again) is reported, without a server: the
``stuck`` refusal is a 409 in plain words, every refusal of the HTTP API names its kind in
``Refusal-Kind``, ``statekeeper stuck`` prints exact commands, and every Temporal server we
start or ship turns the ``TemporalReportedProblems`` mark on. The whole path on a real server
is tests/e2e/test_stuck_runs.py."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import get_args

import pytest
import yaml
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from temporalio.service import RPCError, RPCStatusCode

from starter.api.refusal_kind import RefusalKind, with_kind
from starter.client import core
from starter.cli.health import render
from starter.client.errors import ConversationError, status_for
from starter.client.run_status import (GENERIC, STUCK_CLAUSE, TIMED_OUT, TRIGGER_SETTING, StuckRun, cause_words,
                                  reported_stuck, stuck_error, stuck_run)
from starter.dev.server import DYNAMIC_CONFIG, dynamic_config_args

REPO = Path(__file__).resolve().parents[2]
SINCE = datetime(2026, 12, 6, 4, 12, 9, tzinfo=timezone.utc)
TOO_LARGE = ["category=WorkflowTaskFailed", "cause=WorkflowTaskFailedCausePayloadsTooLarge"]


def test_a_stuck_refusal_is_a_409_in_plain_words_that_says_nothing_moves_until_an_operator_acts():
    err = stuck_error("conversation desk-43", TOO_LARGE, 7, SINCE)
    assert err.kind == "stuck" and status_for(err) == 409
    text = str(err)
    assert text.startswith("conversation desk-43 is stuck since 2026-12-06 04:12:09 UTC: a value it handles is "
                           "over Temporal's size limit, 7 attempts so far.")
    assert "until an operator acts" in text and "statekeeper stuck" in text
    for internal in ("cause=", "WorkflowTaskFailed", "not reachable", "support-", "Error"):
        assert internal not in text


def test_a_message_refused_as_stuck_names_the_id_to_send_it_again_with():
    err = stuck_error("conversation desk-43", TOO_LARGE, 3, None, message_id="m-7")
    assert err.message_id == "m-7" and 'message_id "m-7"' in str(err) and " since " not in str(err)


def _not_ready() -> RPCError:
    return RPCError("Workflow is not ready to handle the request.", RPCStatusCode.FAILED_PRECONDITION, b"")


async def test_an_update_the_server_refuses_as_not_ready_is_refused_stuck_once_the_run_is():
    looks = []

    async def start(_timeout):
        raise _not_ready()  # what the server answers right after the run's workflow task failed

    async def stuck():
        looks.append(1)  # the second problem in a row comes a workflow task timeout later
        return stuck_error("conversation c", ["category=WorkflowTaskFailed"], 3) if len(looks) == 2 else None

    with pytest.raises(ConversationError) as refused:
        await core.ClientCore(None, "q").run_update(start, "the message", stuck=stuck)
    assert refused.value.kind == "stuck" and len(looks) == 2


async def test_an_update_refused_as_not_ready_by_a_run_that_is_not_stuck_keeps_the_servers_answer(monkeypatch):
    monkeypatch.setattr(core, "STUCK_SETTLE_SECONDS", 0.5)

    async def start(_timeout):
        raise _not_ready()

    async def never():
        return None

    with pytest.raises(RPCError):
        await core.ClientCore(None, "q").run_update(start, "the message", stuck=never)


def test_the_cause_is_worded_from_temporals_reported_problems():
    assert "no longer matches" in cause_words(["category=WorkflowTaskFailed",
                                               "cause=WorkflowTaskFailedCauseNonDeterministicError"])
    assert cause_words(["category=WorkflowTaskTimedOut"]) == TIMED_OUT
    assert cause_words(["category=WorkflowTaskFailed", "cause=SomethingNew"]) == GENERIC
    assert reported_stuck(TOO_LARGE) and reported_stuck(["category=WorkflowTaskTimedOut"])
    assert not reported_stuck([]) and not reported_stuck(["category=SomethingElse"])


def test_the_stuck_filter_is_the_web_uis_task_failures_view():
    assert STUCK_CLAUSE == ('ExecutionStatus = "Running" AND `TemporalReportedProblems` IN '
                            '("category=WorkflowTaskFailed", "category=WorkflowTaskTimedOut")')


def _app() -> FastAPI:
    app = FastAPI()
    app.add_middleware(RefusalKind)

    @app.get("/too-large")
    async def too_large() -> JSONResponse:
        return JSONResponse(status_code=413, content={"detail": "over the limit"})

    @app.get("/stuck")
    async def stuck() -> JSONResponse:
        err = ConversationError("conversation x is stuck", "stuck")
        return JSONResponse(status_code=status_for(err), content={"detail": str(err)}, headers=with_kind(err))

    @app.get("/fine")
    async def fine() -> dict:
        return {"ok": True}

    return app


def test_every_refusal_names_its_kind_and_an_answer_keeps_its_own():
    http = TestClient(_app())
    assert http.get("/stuck").headers["Refusal-Kind"] == "stuck"  # a 409, not "conflict"
    assert http.get("/too-large").headers["Refusal-Kind"] == "too_large"
    assert http.get("/nowhere").headers["Refusal-Kind"] == "not_found"
    assert "Refusal-Kind" not in http.get("/fine").headers


def test_statekeeper_stuck_prints_what_fails_and_the_exact_commands():
    run = StuckRun(process="conversation", process_id="desk 43", workflow_id="support-desk 43",
                   cause="the workflow code fails with an error", attempt=5, since=SINCE)
    shown = render([run], "temporal:7233", "default", "http://127.0.0.1:8233")
    assert shown.startswith("1 run is stuck: their workflow tasks keep failing")
    # the Web UI's list of every stuck run: the filter the API's ?status=stuck uses
    assert "Web UI list: http://127.0.0.1:8233/namespaces/default/workflows?query=ExecutionStatus%20%3D%20%22Running" \
           "%22%20AND%20%60TemporalReportedProblems%60%20IN%20%28" in shown
    assert "conversation desk 43 (workflow support-desk 43) is stuck since 2026-12-06 04:12:09 UTC, attempt 5: " \
           "the workflow code fails with an error" in shown
    # ids quoted for a shell: pasted as printed, each command acts on this run only
    assert "statekeeper replay-check 'desk 43' && statekeeper resume 'desk 43'" in shown
    assert ("temporal workflow terminate --address temporal:7233 --namespace default --workflow-id "
            "'support-desk 43' --reason 'stuck: the workflow code fails with an error'") in shown
    assert "temporal workflow reset --address temporal:7233 --namespace default --workflow-id 'support-desk 43' " \
           "--type LastWorkflowTask" in shown
    assert "temporal workflow cancel --address temporal:7233" in shown
    refund = stuck_run("refund-r1", "RefundWorkflow", ["category=WorkflowTaskTimedOut"])
    shown = render([refund], "127.0.0.1:7233", "default", "http://127.0.0.1:8233")
    assert "refund refund-r1 (workflow refund-r1) is stuck: " + TIMED_OUT in shown
    assert "statekeeper resume" not in shown  # replay-check and resume are a conversation's
    assert render([], "127.0.0.1:7233", "default", "http://x") == "no stuck conversations or refunds"


def test_every_temporal_server_we_start_or_ship_marks_a_run_at_its_second_problem_in_a_row():
    assert DYNAMIC_CONFIG[TRIGGER_SETTING] == "2"  # `statekeeper dev` and the tests' servers
    args = dynamic_config_args()
    assert args[args.index(f"{TRIGGER_SETTING}=2") - 1] == "--dynamic-config-value"
    compose = yaml.safe_load((REPO / "deploy/temporal/dynamicconfig/development-sql.yaml").read_text())
    assert compose[TRIGGER_SETTING] == [{"value": 2, "constraints": {}}]


def test_stuck_is_a_status_the_lists_filter_by():
    from starter.api.models import ConversationStatusFilter
    from starter.api.processes import RefundListStatus

    assert "stuck" in get_args(get_args(get_args(ConversationStatusFilter)[0])[0])
    assert "stuck" in get_args(RefundListStatus)
