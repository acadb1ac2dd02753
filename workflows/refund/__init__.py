"""``RefundWorkflow`` (``workflow``): one refund-type write with its approval gate, as a child
of a conversation or standalone for a backend service, and its Web UI view."""
