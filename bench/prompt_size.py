"""Model input size per turn: statekeeper's state snapshot vs resending the transcript.

Baseline (same process): the tutorial approach, where every model call resends every
user and assistant message and every tool result so far. statekeeper renders the state
instead (pinned facts + the last 6 turns + bounded observations). Sizes are characters
of the per-call user content (the system prompt is identical in both and excluded);
tokens ≈ chars / 4.

Run: ``.venv/bin/python bench/prompt_size.py [--turns 100]``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from systems.retail import load_data  # noqa: E402
from workflows import transitions as tr  # noqa: E402
from workflows.actions import make_tool_call  # noqa: E402
from workflows.prompt import render_content  # noqa: E402
from workflows.state import ConversationState, Role  # noqa: E402


def simulate(turns: int) -> list[tuple[int, int, int]]:
    """(turn, snapshot chars, transcript chars) for a conversation where every turn reads an order."""
    data = load_data()
    user_id = "raj_sanchez_2970"
    user = data["users"][user_id]
    state = ConversationState(conversation_id="bench")
    transcript: list[str] = []
    rows = []
    order_ids = user["orders"]
    for turn in range(1, turns + 1):
        text = f"Hi, my email is {user['email']}" if turn == 1 else f"What about order {order_ids[turn % len(order_ids)]}?"
        tr.receive_user_message(state, text)
        transcript.append(f"user: {text}")
        if turn == 1:
            calls = [("find_user_id_by_email", {"email": user["email"]}, user_id),
                     ("get_user_details", {"user_id": user_id}, json.dumps(user))]
        else:
            order_id = order_ids[turn % len(order_ids)]
            calls = [("get_order_details", {"order_id": order_id}, json.dumps(data["orders"][order_id]))]
        for name, args, result in calls:
            tr.apply_read_result(state, make_tool_call(name, args), result)
            transcript.append(f"tool {name}({json.dumps(args)}): {result}")
        reply = f"Here is what I found for turn {turn}."
        tr.add_turn(state, Role.ASSISTANT, reply)
        transcript.append(f"assistant: {reply}")
        rows.append((turn, len(render_content(state)), len("\n".join(transcript))))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=100)
    turns = parser.parse_args().turns
    rows = simulate(turns)
    table = Table(title=f"Model input per call over {turns} turns (characters; tokens ≈ chars/4)")
    for col in ("turn", "statekeeper snapshot", "full transcript (baseline)", "snapshot / baseline"):
        table.add_column(col, justify="right")
    for turn, snapshot, baseline in rows:
        if turn in (1, 5, 10, 30, 50, 100, turns):
            table.add_row(str(turn), f"{snapshot:,}", f"{baseline:,}", f"{snapshot / baseline:.2f}")
    Console(width=140).print(table)
    total_snapshot = sum(r[1] for r in rows)
    total_baseline = sum(r[2] for r in rows)
    print(f"cumulative over {turns} calls: snapshot {total_snapshot:,} chars, baseline {total_baseline:,} chars, "
          f"ratio {total_snapshot / total_baseline:.3f}")


if __name__ == "__main__":
    main()
