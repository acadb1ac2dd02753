"""The tokens benchmark suite; ``bench/tokens.py`` runs it."""
