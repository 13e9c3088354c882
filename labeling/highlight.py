"""Query-term highlighting for the workspace: a passage split into plain and matching segments, so the
template escapes every piece of the (untrusted) text and only wraps matches in <mark>."""
from __future__ import annotations

import re
from dataclasses import dataclass

STOPWORDS = frozenset(
    "a an and are as at be by can could did do does for from has have how in into is it its of on or that the "
    "their there these this those to was were what when where which who why will with would your you any all "
    "not no than then them they we our us".split()
)
MIN_TERM_CHARS = 3
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Segment:
    text: str
    hit: bool


def _singular_stem(word: str) -> str:
    """A plural's stem, so the singular matches too ("targets" -> "target", "companies" -> "compan")."""
    if len(word) <= 4 or not word.endswith("s") or word.endswith("ss"):
        return word
    if word.endswith("ies"):
        return word[:-3]
    if word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    return word[:-1]


def query_terms(query: str) -> list[str]:
    """The query's content words, lower-cased and plurals reduced to their stem, longest first, without
    duplicates or stopwords."""
    words = {w.lower() for w in _WORD.findall(query)}
    terms = {_singular_stem(w) for w in words if len(w) >= MIN_TERM_CHARS and w not in STOPWORDS}
    return sorted(terms, key=lambda w: (-len(w), w))


def highlight_segments(text: str, query: str) -> list[Segment]:
    """`text` cut into segments; a segment is a hit when it is a word starting with one of the query's terms
    (so "emissions" matches the term "emission"), compared case-insensitively."""
    terms = query_terms(query)
    if not terms or not text:
        return [Segment(text, False)] if text else []
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(t) for t in terms) + r")\w*", re.IGNORECASE | re.UNICODE)
    segments: list[Segment] = []
    start = 0
    for match in pattern.finditer(text):
        if match.start() > start:
            segments.append(Segment(text[start:match.start()], False))
        segments.append(Segment(match.group(0), True))
        start = match.end()
    if start < len(text):
        segments.append(Segment(text[start:], False))
    return segments
