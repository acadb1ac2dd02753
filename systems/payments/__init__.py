"""The simulated payments service: moves money for cancellations, payment changes and refunds."""
