"""The pure, sandbox-safe domain of the workflows: the conversation's typed state and records,
money, proposed actions, transitions, effect keys, schema migrations, replies and the prompt
view. Nothing here does I/O or imports Temporal's workflow API."""
