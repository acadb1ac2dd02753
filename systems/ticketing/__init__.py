"""The simulated ticketing service: human hand-offs."""
