"""Webhook deliveries (``workflow``): one workflow per delivery, and the sweeper of the outbox."""
