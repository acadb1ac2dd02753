"""``statekeeper memory`` (``commands``)."""
