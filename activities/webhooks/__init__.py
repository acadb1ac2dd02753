"""Webhooks: where a delivery may go (``addresses``), one signed attempt (``delivery``) and
starting the delivery workflows from the outbox (``starts``)."""
