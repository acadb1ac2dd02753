"""The webhooks' HTTP routes (``routes``)."""
