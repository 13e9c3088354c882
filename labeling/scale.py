"""The label scale of a project: ordered grades with names and nDCG gains, and the relevance cut-off."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from labeling.exceptions import DomainError


class ScaleError(DomainError):
    """A label scale that cannot be used (raised with a message naming what is wrong)."""


@dataclass(frozen=True)
class Grade:
    value: int
    name: str
    gain: float


@dataclass(frozen=True)
class LabelScale:
    grades: tuple[Grade, ...]
    relevant_from: int

    @classmethod
    def from_json(cls, data: Any) -> LabelScale:
        """Build and validate a scale from its JSON form {"grades": [...], "relevant_from": n}."""
        if not isinstance(data, dict):
            raise ScaleError("the scale must be an object with 'grades' and 'relevant_from'")
        raw_grades = data.get("grades")
        if not isinstance(raw_grades, list) or not raw_grades:
            raise ScaleError("the scale needs a non-empty list 'grades'")
        grades = []
        for index, raw in enumerate(raw_grades):
            if not isinstance(raw, dict):
                raise ScaleError(f"grade #{index + 1} must be an object with value, name and gain")
            value, name, gain = raw.get("value"), raw.get("name"), raw.get("gain")
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ScaleError(f"grade #{index + 1}: value must be a non-negative integer, got {value!r}")
            if not isinstance(name, str) or not name.strip():
                raise ScaleError(f"grade #{index + 1}: name must be a non-empty string")
            if isinstance(gain, bool) or not isinstance(gain, int | float) or not math.isfinite(gain) or gain < 0:
                raise ScaleError(f"grade #{index + 1}: gain must be a non-negative number, got {gain!r}")
            grades.append(Grade(value=value, name=name.strip(), gain=float(gain)))
        values = [g.value for g in grades]
        if values != sorted(set(values)):
            raise ScaleError(f"grade values must be distinct and ascending, got {values}")
        names = [g.name.lower() for g in grades]
        if len(set(names)) != len(names):
            raise ScaleError("grade names must be distinct")
        relevant_from = data.get("relevant_from")
        if relevant_from not in values or isinstance(relevant_from, bool):
            raise ScaleError(f"relevant_from must be one of the grade values {values}, got {relevant_from!r}")
        return cls(grades=tuple(grades), relevant_from=relevant_from)

    def to_json(self) -> dict:
        return {
            "grades": [{"value": g.value, "name": g.name, "gain": g.gain} for g in self.grades],
            "relevant_from": self.relevant_from,
        }

    @property
    def values(self) -> tuple[int, ...]:
        return tuple(g.value for g in self.grades)

    @property
    def top(self) -> int:
        return self.grades[-1].value

    def grade(self, value: int) -> Grade:
        for grade in self.grades:
            if grade.value == value:
                return grade
        raise ScaleError(f"grade {value} is not on the scale {list(self.values)}")

    def parse(self, raw: Any) -> int:
        """The grade value for a file's label: a grade value, or a grade name (case-insensitive)."""
        if isinstance(raw, bool):
            raise ScaleError(f"label {raw!r} is not a grade")
        if isinstance(raw, int) or (isinstance(raw, float) and raw.is_integer()):
            value = int(raw)
            if value in self.values:
                return value
            raise ScaleError(f"grade {value} is outside the scale {list(self.values)}")
        if isinstance(raw, str):
            text = raw.strip()
            if text.lstrip("-").isdigit():
                return self.parse(int(text))
            for grade in self.grades:
                if grade.name.lower() == text.lower():
                    return grade.value
            names = ", ".join(repr(g.name) for g in self.grades)
            raise ScaleError(f"label {raw!r} is not a grade of the scale ({names})")
        raise ScaleError(f"label {raw!r} is not a grade")

    def is_relevant(self, value: int) -> bool:
        return value >= self.relevant_from


DEFAULT_SCALE = LabelScale(
    grades=(
        Grade(0, "irrelevant", 0.0),
        Grade(1, "partially relevant", 0.5),
        Grade(2, "relevant", 1.0),
    ),
    relevant_from=1,
)


def default_scale_json() -> dict:
    return DEFAULT_SCALE.to_json()
