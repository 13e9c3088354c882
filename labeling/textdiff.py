"""Word-level diff of two texts for display: lines matched first, then changed lines sentence by sentence and
word by word; the pieces are plain text that the caller escapes. No database, no Django."""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from difflib import SequenceMatcher
from os.path import commonprefix
from typing import Literal

DIFF_CONTEXT_LINES = 3
# Above this many token comparisons a changed stretch is shown as removed and re-added as a whole: word
# matching costs up to the product of the two lengths, and a page must not hang on a rewritten essay.
MAX_WORD_DIFF_WORK = 4_000_000
# A word or a punctuation mark with the whitespace after it: a changed word shows as a whole word, and
# the tokens join back into the exact text.
_TOKEN = re.compile(r"\w+\s*|[^\w\s]\s*|\s+", re.UNICODE)
_WORD = re.compile(r"\w+", re.UNICODE)
# Cut after a sentence's end and its first whitespace character, and after every line break.
_SENTENCE_END = re.compile(r"(?<=[.!?]\s)|(?<=\n)")

Op = Literal["equal", "insert", "delete"]


@dataclass(frozen=True)
class DiffPiece:
    op: Op
    text: str


@dataclass(frozen=True)
class DiffBlock:
    """A run of changed lines with their context, or (`skipped_lines` > 0, no pieces) unchanged lines left out."""

    pieces: tuple[DiffPiece, ...] = ()
    skipped_lines: int = 0


@dataclass(frozen=True)
class TextDiff:
    blocks: tuple[DiffBlock, ...]
    words_added: int
    words_removed: int


def _word_count(text: str) -> int:
    return len(_WORD.findall(text))


def _opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    # Elements are compared without the whitespace they end with: "target" before a full stop and "target "
    # before more words are the same word, and the line that ends the text matches one with a line break.
    keys = ([x.rstrip() for x in a], [y.rstrip() for y in b])
    return SequenceMatcher(None, *keys, autojunk=False).get_opcodes()


def _opcode_pieces(
    a: list[str], b: list[str], opcodes: Iterable[tuple[str, int, int, int, int]],
    changed: Callable[[str, str], list[DiffPiece]],
) -> list[DiffPiece]:
    """Pieces for difflib opcodes over token lists `a` and `b`; `changed(old, new)` splits a replacement."""
    pieces: list[DiffPiece] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            # Equal elements may still differ in their trailing whitespace: that difference is the change.
            for old, new in zip(a[i1:i2], b[j1:j2]):
                same = commonprefix([old, new])
                pieces.extend(
                    DiffPiece(op, text) for op, text in (("equal", same), ("delete", old[len(same):]),
                                                         ("insert", new[len(same):])) if text
                )
        elif tag == "replace":
            pieces.extend(changed("".join(a[i1:i2]), "".join(b[j1:j2])))
        elif tag == "delete":
            pieces.append(DiffPiece("delete", "".join(a[i1:i2])))
        else:
            pieces.append(DiffPiece("insert", "".join(b[j1:j2])))
    return pieces


def _word_pieces(old: str, new: str) -> list[DiffPiece]:
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    if len(a) * len(b) > MAX_WORD_DIFF_WORK:
        return [DiffPiece("delete", old), DiffPiece("insert", new)]
    return _opcode_pieces(a, b, _opcodes(a, b), lambda o, n: [DiffPiece("delete", o), DiffPiece("insert", n)])


def _sentence_pieces(old: str, new: str) -> list[DiffPiece]:
    """Changed lines matched sentence by sentence, then the changed sentences word by word: a small edit in
    a long paragraph costs the length of its sentence, not of the paragraph."""
    a = [s for s in _SENTENCE_END.split(old) if s]
    b = [s for s in _SENTENCE_END.split(new) if s]
    return _opcode_pieces(a, b, _opcodes(a, b), _word_pieces)


def _merged(pieces: list[DiffPiece]) -> tuple[DiffPiece, ...]:
    """Adjacent pieces of the same kind joined, deletions before insertions within a change, and whitespace
    that both sides of a change end with moved out of it (so "the cat " -> "a dog " underlines no space)."""
    out: list[DiffPiece] = []
    pending = {"delete": "", "insert": ""}

    def flush() -> None:
        deleted, inserted = pending["delete"], pending["insert"]
        tail = ""
        if deleted and inserted:
            shared = len(deleted) - len(deleted.rstrip())
            shared = min(shared, len(inserted) - len(inserted.rstrip()))
            if shared and deleted[-shared:] == inserted[-shared:]:
                tail, deleted, inserted = deleted[-shared:], deleted[:-shared], inserted[:-shared]
        out.extend(DiffPiece(op, text) for op, text in (("delete", deleted), ("insert", inserted)) if text)
        if tail:
            append_equal(tail)
        pending.update(delete="", insert="")

    def append_equal(text: str) -> None:
        if out and out[-1].op == "equal":
            out[-1] = DiffPiece("equal", out[-1].text + text)
        else:
            out.append(DiffPiece("equal", text))

    for piece in pieces:
        if piece.op == "equal":
            flush()
            append_equal(piece.text)
        else:
            pending[piece.op] += piece.text
    flush()
    return tuple(piece for piece in out if piece.text)


def text_diff(old: str | None, new: str, *, context_lines: int | None = DIFF_CONTEXT_LINES) -> TextDiff:
    """The changes from `old` (None: nothing before, all of `new` inserted) to `new`: lines are matched first,
    then changed lines sentence by sentence and word by word. Unchanged lines further than `context_lines` from
    a change are left out and counted; None keeps every line (the whole text, its changes marked)."""
    old_lines = old.splitlines(keepends=True) if old is not None else []
    new_lines = new.splitlines(keepends=True)
    keys = ([line.rstrip() for line in old_lines], [line.rstrip() for line in new_lines])
    matcher = SequenceMatcher(None, *keys, autojunk=False)
    blocks: list[DiffBlock] = []
    shown_to = 0  # index in old_lines after the last block shown
    keep = context_lines if context_lines is not None else max(len(old_lines), len(new_lines))
    for group in matcher.get_grouped_opcodes(keep):
        if group[0][1] > shown_to:
            blocks.append(DiffBlock(skipped_lines=group[0][1] - shown_to))
        blocks.append(DiffBlock(pieces=_merged(_opcode_pieces(old_lines, new_lines, group, _sentence_pieces))))
        shown_to = group[-1][2]
    if blocks and shown_to < len(old_lines):
        blocks.append(DiffBlock(skipped_lines=len(old_lines) - shown_to))
    pieces = [piece for block in blocks for piece in block.pieces]
    return TextDiff(
        blocks=tuple(blocks),
        words_added=sum(_word_count(p.text) for p in pieces if p.op == "insert"),
        words_removed=sum(_word_count(p.text) for p in pieces if p.op == "delete"),
    )
