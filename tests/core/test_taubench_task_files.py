"""A wrong file given to ``statekeeper taubench --tasks`` is refused in one line naming the
file and what is wrong, before any server starts. Seen as a new user: a list of strings
ended in a traceback (``AttributeError: 'str' object has no attribute 'setdefault'``), the
tool schema printed pydantic's dump with ``input_value=...`` and its web links, a non-JSON
file said only ``Expecting value: line 1 column 1 (char 0)``, a file in another encoding
the codec's text, and an empty list "ran" 0 tasks with exit status 0. A task whose
``user_id`` the data does not hold failed as ``JSONDecodeError: Expecting value ...``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from starter.cli.app import app
from starter.ops.taubench_tasks import Task, load_tasks, task_user

GOOD = {"user_id": "raj_sanchez_2970", "gt_data_hash": "abc", "actions": [], "outputs": []}


def _file(tmp_path, content) -> str:
    path = tmp_path / "tasks.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


@pytest.mark.parametrize("content, reason", [
    (["a"], "task at position 0 is malformed: a task is a JSON object, not a string"),
    ([GOOD, 7], "task at position 1 is malformed: a task is a JSON object, not a number"),
    ([{"type": "function"}], "task at position 0 is malformed: missing user_id, gt_data_hash"),
    ([dict(GOOD, actions="x")], "task at position 0 is malformed: actions: Input should be a valid list"),
    ("not json", "not a τ-bench task file: not JSON (Expecting value at line 1)"),
    (b"\xff\xfe[]", "not a τ-bench task file: it is not UTF-8 text"),
    ([], "the list holds no tasks"),
    ({"tasks": []}, "expected a JSON list of tasks"),
])
def test_a_wrong_file_is_one_reason_naming_it(tmp_path, content, reason):
    path = _file(tmp_path, content)
    with pytest.raises(ValueError) as refused:
        load_tasks(path)
    assert str(refused.value) == f"{path}: {reason}"
    assert "errors.pydantic.dev" not in str(refused.value) and "input_value" not in str(refused.value)


def test_a_good_file_loads_with_positions_as_indexes(tmp_path):
    tasks = load_tasks(_file(tmp_path, [GOOD, dict(GOOD, task_index=9)]))
    assert [t.task_index for t in tasks] == [0, 9]


def test_the_command_refuses_before_starting_anything(tmp_path):
    path = _file(tmp_path, ["a"])
    result = CliRunner().invoke(app, ["taubench", "--tasks", path], env={"COLUMNS": "300", "NO_COLOR": "1"})
    assert result.exit_code == 2
    assert result.output.startswith("statekeeper: ") and "a task is a JSON object, not a string" in result.output
    assert "Traceback" not in result.output and "AttributeError" not in result.output


def test_a_user_the_data_lacks_is_named():
    task = Task(task_index=0, **dict(GOOD, user_id="nobody_0000"))
    with pytest.raises(LookupError, match="the task's user_id 'nobody_0000' is not a customer of the retail "
                                          r"data \(user not found\)"):
        task_user("Error: user not found", task)
    assert task_user('{"user_id": "raj_sanchez_2970"}', task) == {"user_id": "raj_sanchez_2970"}
