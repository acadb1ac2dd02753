"""The simulated email service: sends customer emails; no idempotency keys."""
