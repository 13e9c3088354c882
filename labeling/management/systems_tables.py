"""What the commands that print the systems' numbers (evaluate_runs, pool_reusability) write the same way: a score
to three decimals ("-" for none) and a table of left-aligned columns."""
from __future__ import annotations


def number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def table_lines(header: list[str], rows: list[list[str]]) -> list[str]:
    """The header and the rows, each column as wide as its widest cell plus two spaces, trailing spaces cut."""
    widths = [max(len(row[i]) for row in [header, *rows]) + 2 for i in range(len(header))]
    return ["".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]
