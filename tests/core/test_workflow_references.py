"""Workflow code references activities and child workflows by function or method, never
by a name string, so a reader or a type checker can follow every call across the
Temporal boundary; and every activity the workflows call is implemented by the worker."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from activities.erasure.activity import RetentionActivities
from activities.identity import IdentityActivities
from activities.llm.model_activity import ModelActivities
from activities.tools import ToolActivities
from workflows.activity_api import IdentityActivitiesApi, ModelActivitiesApi, ToolActivitiesApi
from workflows.retention.workflow import RetentionActivitiesApi

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
CALLS = {"execute_activity", "start_activity", "execute_activity_method", "start_activity_method",
         "execute_local_activity", "start_local_activity", "execute_child_workflow", "start_child_workflow"}


def _string_references(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CALLS:
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.append(f"{path.name}:{node.lineno} {node.func.attr}({node.args[0].value!r})")
    return found


@pytest.mark.parametrize("path", sorted(WORKFLOWS.rglob("*.py")), ids=lambda p: p.name)
def test_no_activity_or_workflow_is_called_by_name(path: Path):
    assert _string_references(path) == []


def test_the_check_catches_a_name_string(tmp_path: Path):
    probe = tmp_path / "probe.py"
    probe.write_text("async def f(workflow):\n    await workflow.execute_activity('run_read_tool', 1)\n")
    assert _string_references(probe) == ["probe.py:2 execute_activity('run_read_tool')"]


@pytest.mark.parametrize("api, implementation", [(ToolActivitiesApi, ToolActivities),
                                                 (ModelActivitiesApi, ModelActivities),
                                                 (IdentityActivitiesApi, IdentityActivities),
                                                 (RetentionActivitiesApi, RetentionActivities)])
def test_every_declared_activity_is_implemented_under_its_name(api, implementation):
    for name, member in vars(api).items():
        declared = getattr(member, "__temporal_activity_definition", None)
        if declared is None:
            continue
        implemented = getattr(getattr(implementation, name), "__temporal_activity_definition", None)
        assert implemented is not None and implemented.name == declared.name, name


def test_strict_runner_loads_the_project_inside_the_sandbox_and_the_fast_one_shares_it():
    from starter.runtime.worker import PROJECT_MODULES, workflow_runner

    strict = workflow_runner(sandbox_project_modules=True).restrictions.passthrough_modules
    fast = workflow_runner(sandbox_project_modules=False).restrictions.passthrough_modules
    assert "pydantic" in strict and not set(PROJECT_MODULES) & set(strict)
    assert set(PROJECT_MODULES) <= set(fast)


def test_workers_run_sandboxed_unless_the_setting_turns_the_sandbox_off():
    from temporalio.worker import UnsandboxedWorkflowRunner
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

    from settings import Settings
    from starter.runtime.worker import workflow_runner

    assert Settings(_env_file=None).workflow_sandbox is True
    assert isinstance(workflow_runner(sandbox_project_modules=False), SandboxedWorkflowRunner)
    assert isinstance(workflow_runner(sandbox_project_modules=False, sandboxed=False), UnsandboxedWorkflowRunner)
