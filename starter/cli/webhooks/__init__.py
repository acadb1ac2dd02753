"""``statekeeper webhooks`` (``commands``)."""
