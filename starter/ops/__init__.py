"""Operator tools: the safe-replay decision and resume, the evidence behind a resolution,
backtests of prompt versions and models, retention listings, and the τ-bench runner."""
