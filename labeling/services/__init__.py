"""Writes: keyword-only functions that own their transaction."""
