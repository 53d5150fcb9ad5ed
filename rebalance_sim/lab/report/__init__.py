"""Turning aggregated runs into figures, sentences and a self-contained HTML report."""
