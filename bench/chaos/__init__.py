"""The chaos benchmark suite; ``bench/chaos.py`` runs it."""
