"""Temporary staging tables for bulk loads: COPY on PostgreSQL, batched executemany elsewhere.

A bulk import streams validated rows into these tables and then merges them into the real tables with
set-based SQL, so memory stays flat whatever the size of the files."""
from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

BATCH_ROWS = 5_000


class StagingTable:
    """One temporary table. Use `with table.writer() as write: write(row)` to load it."""

    def __init__(self, connection: BaseDatabaseWrapper, name: str, columns: Sequence[tuple[str, str]]) -> None:
        self.connection = connection
        self.name = name
        self.columns = [column for column, _ in columns]
        self._ddl = ", ".join(f"{column} {sql_type}" for column, sql_type in columns)
        self.rows = 0

    def create(self) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {self.name}")
            cursor.execute(f"CREATE TEMPORARY TABLE {self.name} ({self._ddl})")

    def drop(self) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {self.name}")

    def analyze(self) -> None:
        # Autovacuum never analyzes temporary tables: without statistics PostgreSQL may pick nested loops
        # over a million staged rows.
        if self.connection.vendor == "postgresql":
            with self.connection.cursor() as cursor:
                cursor.execute(f"ANALYZE {self.name}")

    def writer(self) -> _Writer:
        return _Writer(self)


class _Writer:
    def __init__(self, table: StagingTable) -> None:
        self.table = table
        self._cursor: Any = None
        self._copy_cm: Any = None
        self._copy: Any = None
        self._batch: list[tuple] = []

    def __enter__(self) -> _Writer:
        table = self.table
        self._cursor = table.connection.cursor()
        if table.connection.vendor == "postgresql":
            columns = ", ".join(table.columns)
            self._copy_cm = self._cursor.copy(f"COPY {table.name} ({columns}) FROM STDIN")
            self._copy = self._copy_cm.__enter__()
        return self

    def __call__(self, row: tuple) -> None:
        self.table.rows += 1
        if self._copy is not None:
            self._copy.write_row(row)
            return
        self._batch.append(row)
        if len(self._batch) >= BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._batch:
            placeholders = ", ".join(["%s"] * len(self.table.columns))
            self._cursor.executemany(
                f"INSERT INTO {self.table.name} ({', '.join(self.table.columns)}) VALUES ({placeholders})",
                self._batch,
            )
            self._batch = []

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._copy_cm is not None:
                self._copy_cm.__exit__(exc_type, exc, tb)
            elif exc_type is None:
                self._flush()
        finally:
            self._cursor.close()
        if exc_type is None:
            self.table.analyze()
