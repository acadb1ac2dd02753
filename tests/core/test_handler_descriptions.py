"""Every query, signal and update of the workflows an operator meets in the Web UI has a
description (issue 6, item 5): the *Queries* tab and ``__temporal_workflow_metadata``
show it. Read from the workflow definitions the worker registers."""

from __future__ import annotations

import pytest
from temporalio import workflow

from workflows.refund.workflow import RefundWorkflow
from workflows.retention.workflow import RetentionWorkflow
from workflows.conversation.workflow import SupportWorkflow

WORKFLOWS = (SupportWorkflow, RefundWorkflow, RetentionWorkflow)
"""The workflows `worker.build_worker` registers."""

HANDLERS = [(cls.__name__, kind, name, handler.description)
            for cls in WORKFLOWS
            for kind in ("queries", "signals", "updates")
            for name, handler in getattr(workflow._Definition.must_from_class(cls), kind).items()]


def test_the_operators_workflows_have_handlers():
    names = {(cls, kind, name) for cls, kind, name, _ in HANDLERS}
    assert {("SupportWorkflow", "signals", "cancel"), ("SupportWorkflow", "updates", "send_message"),
            ("SupportWorkflow", "queries", "state"), ("RefundWorkflow", "updates", "decide_approval"),
            ("RefundWorkflow", "queries", "step")} <= names


@pytest.mark.parametrize("workflow_name, kind, name, description", HANDLERS,
                         ids=[f"{c}.{n}" for c, _, n, _ in HANDLERS])
def test_each_handler_is_described(workflow_name, kind, name, description):
    assert description and len(description.strip()) >= 20, f"{workflow_name} {kind} {name} has no description"


def test_the_refund_step_query_names_every_step_a_refund_enters():
    """The ``step`` query's description (the Web UI's *Queries* tab) left out
    ``awaiting_approval``, the step an operator most often finds a refund in."""
    import inspect
    import re

    from workflows.refund import approval_gate, workflow as refund

    entered = {m for module in (refund, approval_gate) for m in re.findall(r'_enter\("([a-z_]+)"', inspect.getsource(module))}
    entered |= {"done", "failed", "escalated"}  # entered through a conditional expression
    description = workflow._Definition.must_from_class(RefundWorkflow).queries["step"].description
    assert "awaiting_approval" in entered
    assert {step for step in entered if step not in description} == set(), description
