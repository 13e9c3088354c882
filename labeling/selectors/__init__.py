"""Reads: typed functions returning querysets, rows and dataclasses. Query tuning lives here."""
