"""What a name is: the one rule every name a person gives is checked against where it ends up in a URL, a file name,
an e-mail header or a log-in (judges, runs, training sets, projects, invited user names), and the repair that
migration 0014 applied to the names stored before the rule."""
from __future__ import annotations

import unicodedata

from labeling.exceptions import DomainError

# Characters no name holds (Unicode categories): they are invisible or end a line, so a name holding one can pass
# for another, cannot be matched by a URL pattern (Django's converters stop at a line break), or splits the header
# it is written into. Ordinary spaces (Zs) are fine inside a name.
_REFUSED = {
    "Cc": "a control character",
    "Cf": "an invisible format character",
    "Cs": "a lone surrogate",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}
# Path segments that browsers resolve away (RFC 3986, 5.2.4): a name with one as a '/'-part has no address.
_DOT_SEGMENTS = frozenset({".", ".."})


class NameRefused(DomainError):
    """A name that breaks the rule; the message names the field and what is wrong."""


def clean_name(value: str, *, what: str, max_length: int) -> str:
    """`value` as it is stored and compared: NFKC-normalised (so that a full-width or ligature look-alike is the
    name it looks like) with the spaces at its ends removed. NameRefused, naming `what` ("judge name"), when it
    holds a control, format or line-separating character anywhere, has a '.' or '..' segment between slashes,
    is empty, or is longer than `max_length`."""
    name = unicodedata.normalize("NFKC", value)
    for position, char in enumerate(name, start=1):
        kind = _REFUSED.get(unicodedata.category(char))
        if kind is not None:
            raise NameRefused(f"the {what} holds {kind} (U+{ord(char):04X}) at position {position}: a name is one "
                              "line of visible characters (spaces at its ends are removed, other invisible "
                              "characters are refused)")
    name = name.strip()
    if not name:
        raise NameRefused(f"the {what} is empty: give it 1 to {max_length} characters")
    if len(name) > max_length:
        raise NameRefused(f"the {what} has {len(name)} characters: at most {max_length}")
    dots = next((segment for segment in name.split("/") if segment in _DOT_SEGMENTS), None)
    if dots is not None:
        raise NameRefused(f"the {what} has {dots!r} between slashes, which a browser drops from an address: "
                          "the name could not be opened")
    return name


def name_repaired(value: str, *, max_length: int) -> str:
    """A stored name made to keep the rule: NFKC, each refused character a space, each run of spaces one space,
    none at the ends, cut to `max_length`, a '.' or '..' segment as underscores. "" when nothing is left."""
    name = unicodedata.normalize("NFKC", value)
    name = "".join(" " if unicodedata.category(char) in _REFUSED else char for char in name)
    name = " ".join(name.split())[:max_length].rstrip()
    return "/".join("_" * len(segment) if segment in _DOT_SEGMENTS else segment for segment in name.split("/"))
