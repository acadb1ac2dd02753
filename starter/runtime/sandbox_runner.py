"""The workflow sandbox without its per-call compiles.

The SDK's sandboxed instance runs every activation, and every payload's serialization context
lookup, as ``exec`` of a short source string (``_Instance._run_code``). ``exec`` of a string
compiles it each time: about 26 µs, and a turn makes well over a hundred such calls (one per
payload sequence the worker encodes or decodes). py-spy put that compile at 6 % of a bench
worker's CPU at 200 concurrent conversations. ``CompiledSandboxedWorkflowRunner``
runs the very same source through code objects compiled once per distinct string: the code
that runs, its restrictions and its imports are unchanged; only the repeated compile is gone.
"""

from __future__ import annotations

import functools
from types import CodeType
from typing import Any

from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox._runner import _Instance


@functools.lru_cache(maxsize=64)
def compiled(source: str) -> CodeType:
    """``source`` compiled as ``exec`` compiles a string (file name ``<string>``), once per string.
    The SDK passes a handful of fixed strings (one per workflow class for the import), so the
    cache stays small."""
    return compile(source, "<string>", "exec")


class _CompiledInstance(_Instance):
    """The SDK's sandboxed instance, executing cached code objects instead of strings."""

    def _run_code(self, code: Any, **extra_globals: Any) -> None:
        super()._run_code(compiled(code) if isinstance(code, str) else code, **extra_globals)


class CompiledSandboxedWorkflowRunner(SandboxedWorkflowRunner):
    """``SandboxedWorkflowRunner`` (same restrictions, same guard) whose instances compile the
    sandbox's source strings once (see the module docstring)."""

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        """A sandboxed instance of ``det``'s workflow (``SandboxedWorkflowRunner.create_instance``)."""
        return _CompiledInstance(det, self.runner_class, self.restrictions)
