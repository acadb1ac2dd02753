"""The tables ``bench/turns.py`` prints: per-turn latency and history, recovery after a SIGKILL
(with the baseline's rows and p95 ratios when it ran one), concurrency."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def show(report: dict) -> None:
    console = Console(width=180)
    if "per_turn_ms" in report:
        _latency(console, report)
    if any(report.get(k) for k in ("recovery_seconds", "failover_seconds", "baseline_recovery_seconds",
                                     "baseline_failover_seconds")):
        _recovery(console, report)
    if report["concurrency"]:
        _concurrency(console, report)


def _latency(console: Console, report: dict) -> None:
    lat = Table(title="Per-turn latency, one read (ms, median)")
    for col in ("statekeeper", "bare Temporal", "in process", "statekeeper / bare"):
        lat.add_column(col, justify="right")
    p = report["per_turn_ms"]
    lat.add_row(f"{p['statekeeper']:.1f}", f"{p['bare']:.1f}", f"{p['in_process']:.1f}",
                f"{p['statekeeper'] / p['bare']:.2f}x")
    console.print(lat)
    h = report["history"]
    console.print(f"History per turn with one read: {h['events_per_turn']} events, {h['bytes_per_turn']:.0f} bytes "
                  "(as stored, codec on)")


def _recovery(console: Console, report: dict) -> None:
    rec = Table(title="Reply after a SIGKILL (s): restart = from starting a new worker process (its Python "
                      "startup included); failover = from the kill, another worker already running")
    for col in ("during", "mode", "n", "p50", "p95", "max", "exactly one effect"):
        rec.add_column(col, justify="right")
    rec.add_column("code", justify="left")
    rec.add_column("p95 / baseline p95", justify="right")
    keys = [("restart", "recovery_seconds", "current"), ("failover", "failover_seconds", "current"),
            ("restart", "baseline_recovery_seconds", f"baseline {report.get('baseline')}"),
            ("failover", "baseline_failover_seconds", f"baseline {report.get('baseline')}")]
    for mode, key, code in keys:
        for kind, r in report.get(key, {}).items():
            rec.add_row(kind, mode, str(r["n"]), f"{r['p50']:.2f}", f"{r['p95']:.2f}", f"{r['max']:.2f}",
                        f"{r['exactly_once']}/{r['n']}", code, _ratio(report, key, kind))
    console.print(rec)


def _ratio(report: dict, key: str, kind: str) -> str:
    """The current code's p95 over the baseline's for the same kind and mode ("" without one)."""
    if key.startswith("baseline_"):
        return ""
    base = report.get(f"baseline_{key}", {}).get(kind)
    return f"{report[key][kind]['p95'] / base['p95']:.2f}x" if base and base["p95"] else ""


def _concurrency(console: Console, report: dict) -> None:
    con = Table(title=f"Concurrency ({report['system_of_record']} system of record)")
    con.add_column("code", no_wrap=True)
    for col in ("round", "conversations", "workers", "turns", "failed", "turns/s", "turns/CPU-s", "p50 s", "p95 s",
                "activity timeouts", "task timeouts", "writes", "duplicates"):
        con.add_column(col, justify="right")
    for r in report["concurrency"]:
        con.add_row(r["code"], str(r.get("round", 1)), str(r["conversations"]), str(r["workers"]), str(r["turns"]),
                    str(r["failed"]),
                    f"{r['turns_per_second']:.1f}", f"{r['turns_per_cpu_second']:.2f}", f"{r['p50_turn_seconds']:.2f}",
                    f"{r['p95_turn_seconds']:.2f}", _timeouts(r), _kinds(r["workflow_task_timeouts"]),
                    str(r["writes"]),
                    str(r["duplicates"]))
    console.print(con)
    for line in ratios(report["concurrency"]):
        console.print(line)


def ratios(rows: list[dict]) -> list[str]:
    """Turns per CPU-second of each current row over the baseline's of the same size and round;
    with several rounds, also their mean and the ratio of all turns over all CPU-seconds."""
    lines, pooled = [], {}
    for b in [r for r in rows if r["code"].startswith("baseline") and r["turns_per_cpu_second"]]:
        for cur in [r for r in rows if r["code"].startswith("current") and r["workers"] == b["workers"]
                    and r["conversations"] == b["conversations"] and r.get("round") == b.get("round")]:
            ratio = cur["turns_per_cpu_second"] / b["turns_per_cpu_second"]
            label = f", round {b['round']}" if "round" in b else ""
            lines.append(f"turns/CPU-s at {b['conversations']} conversations, {b['workers']} worker{label}: "
                         f"{cur['code']} / {b['code']} = {ratio:.2f}x")
            pooled.setdefault((b["conversations"], b["workers"], cur["code"], b["code"]), []).append((ratio, cur, b))
    for (conversations, workers, code, base), runs in pooled.items():
        if len(runs) > 1:
            def per_cpu(rs: list[dict]) -> float:
                return sum(r["turns"] for r in rs) / sum(r["worker_cpu_seconds"] + r["server_cpu_seconds"] for r in rs)
            mean = sum(r for r, _, _ in runs) / len(runs)
            pooled_ratio = per_cpu([c for _, c, _ in runs]) / per_cpu([b for _, _, b in runs])
            lines.append(f"turns/CPU-s at {conversations} conversations, {workers} worker, {len(runs)} rounds: {code} / "
                         f"{base} = {mean:.2f}x (mean of rounds), {pooled_ratio:.2f}x (all turns / all CPU-seconds)")
    return lines


def _timeouts(row: dict) -> str:
    """``3 (propose_action:heartbeat 3)``: the count, then by activity and timeout kind."""
    kinds = row.get("activity_timeouts_by_kind") or {}
    return f"{row['activity_timeouts']}" + (f" ({', '.join(f'{k} {n}' for k, n in kinds.items())})" if kinds else "")


def _kinds(counts) -> str:
    """``{"schedule_to_start": 3, ...}`` as ``3 sticky / 0 late``; an int as it is."""
    if isinstance(counts, int):
        return str(counts)
    return f"{counts.get('schedule_to_start', 0)} sticky / {counts.get('start_to_close', 0)} late"
