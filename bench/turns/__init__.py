"""The turns benchmark suite; ``bench/turns.py`` runs it."""
