"""τ-bench task files: the ``Task`` model, loading a task file with a one-line reason for
anything wrong in it, and the customer a task names.

Every refusal names the file and, for an entry, its position and the fields at fault:
``statekeeper taubench`` prints it as one line, so a wrong file (the tool schema, a truncated
download, a file in another encoding) is said as such instead of as a traceback or a
validator's dump.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, Field, ValidationError


class Task(BaseModel):
    """One benchmark task (the file format of ../shared/taubench-retail/tasks_*.json)."""

    task_index: int
    user_id: str
    instruction: str = ""
    actions: list[dict[str, Any]] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)
    gt_data_hash: str


_JSON_KINDS = {str: "a string", int: "a number", float: "a number", bool: "true or false", list: "a list",
               type(None): "null"}


def _fields_at_fault(err: ValidationError) -> str:
    """``missing user_id, gt_data_hash; actions: Input should be a valid list``: the fields
    and what is wrong with each, without the input's repr or the validator's links."""
    missing = [".".join(map(str, e["loc"])) for e in err.errors() if e["type"] == "missing"]
    other = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors() if e["type"] != "missing"]
    parts = ([f"missing {', '.join(missing)}"] if missing else []) + other
    return "; ".join(parts)


def load_tasks(path: Path, limit: Optional[int] = None) -> list[Task]:
    """Tasks from a τ-bench task file; raises ``ValueError`` naming the file and the bad
    entry (a file that is not UTF-8 JSON, not a non-empty list, or an entry that is not a
    task)."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not a τ-bench task file: it is not UTF-8 text") from err
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not a τ-bench task file: not JSON ({err.msg} at line {err.lineno})") from err
    if not isinstance(raw, list):
        raise ValueError(f"{path}: expected a JSON list of tasks")
    if not raw:
        raise ValueError(f"{path}: the list holds no tasks")
    tasks = []
    for position, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise ValueError(f"{path}: task at position {position} is malformed: "
                             f"a task is a JSON object, not {_JSON_KINDS.get(type(entry), 'that')}")
        entry.setdefault("task_index", position)
        try:
            tasks.append(Task.model_validate(entry))
        except ValidationError as err:
            raise ValueError(f"{path}: task at position {position} is malformed: {_fields_at_fault(err)}") from err
    return tasks[:limit] if limit else tasks


def task_user(answer: str, task: Task) -> dict[str, Any]:
    """The customer record the read of ``task.user_id`` answered (``READERS["user_id"]``); raises
    ``LookupError`` naming the id when the store has no such customer (the tool answers
    ``Error: user not found``, which is not JSON)."""
    if answer.startswith("Error:"):
        raise LookupError(f"the task's user_id {task.user_id!r} is not a customer of the retail data "
                          f"({answer.removeprefix('Error:').strip()})")
    return json.loads(answer)
