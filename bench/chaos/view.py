"""What ``bench/chaos.py`` prints: a rich progress bar while it runs and the summary tables
(figures, faults by kind, escalation reasons grouped, tasks that did not end well)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


class Board:
    """``with Board(total) as board: ... board.update(figures)``: the progress bar;
    ``figures`` is ``{"done", "kinds": Counter, "kills", "restarts", "faults"}``."""

    def __init__(self, total: int, console: Console | None = None) -> None:
        self.progress = Progress(
            TextColumn("chaos"), BarColumn(), MofNCompleteColumn(),
            TextColumn("matched {task.fields[matched]} escalated {task.fields[escalated]} "
                       "[red]unmatched {task.fields[unmatched]} lost {task.fields[lost]}[/] | "
                       "kills {task.fields[kills]} restarts {task.fields[restarts]} faults {task.fields[faults]}"),
            TimeElapsedColumn(), console=console or Console())
        self.bar = self.progress.add_task("chaos", total=total, matched=0, escalated=0, unmatched=0, lost=0, kills=0,
                                          restarts=0, faults=0)

    def __enter__(self) -> "Board":
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def update(self, figures: dict[str, Any]) -> None:
        kinds = figures["kinds"]
        if not self.progress.console.is_terminal:  # a log file: one line per finished task
            print(f"chaos {figures['done']}/{self.progress.tasks[0].total:g} {dict(kinds)} kills {figures['kills']} "
                  f"restarts {figures['restarts']} faults {figures['faults']}", flush=True)
        self.progress.update(self.bar, completed=figures["done"], matched=kinds["matched"],
                             escalated=kinds["escalated"], unmatched=kinds["unmatched"], lost=kinds["lost"],
                             kills=figures["kills"], restarts=figures["restarts"], faults=figures["faults"])


def show(result: dict[str, Any], console: Console | None = None) -> None:
    """Print the summary of a run's report (``bench.chaos.run.report``)."""
    console = console or Console(width=160)
    figures = Table(title=f"Chaos suite: {result['tasks']} τ-bench tasks, {result['workers']} workers, "
                          f"fault rate {result['fault_rate']:g}, seed {result['seed']}, {result['seconds']:.0f} s")
    for col in ("tasks", "matched", "escalated", "unmatched", "lost", "duplicates", "worker kills",
                "server restarts", "messages", "retries", "p95 message s"):
        figures.add_column(col, justify="right")
    figures.add_row(*(str(result[k]) for k in ("tasks", "matched", "escalated", "unmatched", "lost", "duplicates",
                                               "worker_kills", "server_restarts", "messages", "message_retries",
                                               "p95_message_seconds")))
    console.print(figures)
    faults = Table(title="Faults injected (payments, email, ticketing)")
    for kind in result["faults"]:
        faults.add_column(kind, justify="right")
    faults.add_row(*(str(v) for v in result["faults"].values()))
    console.print(faults)
    console.print("Duplicates by database: " + ", ".join(f"{k} {v}" for k, v in result["duplicates_by_system"].items()))
    if result["escalation_reasons"]:
        reasons = Table(title="Escalations, reasons grouped (ids blanked)")
        reasons.add_column("tasks", justify="right")
        reasons.add_column("reason")
        for reason, count in result["escalation_reasons"].items():
            reasons.add_row(str(count), reason)
        console.print(reasons)
    bad = [e for e in result["endings"] if e["kind"] in ("unmatched", "lost")]
    if bad:
        table = Table(title="Tasks neither matched nor escalated with a reason")
        for col in ("task", "ending", "status", "reason"):
            table.add_column(col)
        for e in bad:
            table.add_row(str(e["task_index"]), e["kind"], e["status"], e["runner_reason"][:200])
        console.print(table)
