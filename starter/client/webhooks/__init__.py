"""Webhook subscriptions in the client: ``Webhooks`` (``service``: create, list, delete, deliveries,
retry) and ``StatekeeperClient.webhooks`` (``calls``, which loads ``service`` on first use)."""
