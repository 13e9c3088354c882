"""labeling.names: the one rule for a name a person gives (NFKC, one line of visible characters, spaces at the ends
removed, no '.' or '..' between slashes, at most the field's length), and the repair migration 0014 applies."""
from __future__ import annotations

import pytest

from labeling.exceptions import DomainError
from labeling.names import NameRefused, clean_name, name_repaired

NASTY = ["nl\njudge", "nl\r\nSet-Cookie: x=1", "evil\u202etxt.exe", "zero\u200bwidth", "line\u2028break",
         "para\u2029graph", "lone\ud800surrogate", "\x00", "tab\there", "\ufeffbom", "..", "a/./b", " \n ",
         "ﬃ" * 80, "x" * 250, "\u00a0 ａdmin \u3000", "a\u0085b"]


def test_a_line_break_is_refused_with_the_field_the_character_and_its_position():
    with pytest.raises(NameRefused) as refused:
        clean_name("nl\njudge", what="judge name", max_length=200)
    assert str(refused.value).startswith("the judge name holds a control character (U+000A) at position 3: ")
    assert "spaces at its ends are removed" in str(refused.value)
    assert issubclass(NameRefused, DomainError)


@pytest.mark.parametrize(("name", "kind", "code", "position"), [
    ("nl\r\nSet-Cookie: x=1", "a control character", "000D", 3),
    ("evil\u202etxt.exe", "an invisible format character", "202E", 5),
    ("zero\u200bwidth", "an invisible format character", "200B", 5),
    ("\ufeffname", "an invisible format character", "FEFF", 1),
    ("line\u2028break", "a line separator", "2028", 5),
    ("para\u2029graph", "a paragraph separator", "2029", 5),
    ("lone\ud800", "a lone surrogate", "D800", 5),
    ("judge\n", "a control character", "000A", 6),  # only ordinary spaces are stripped, a line break is refused
    ("tab\there", "a control character", "0009", 4),
])
def test_invisible_and_line_breaking_characters_are_refused_anywhere(name, kind, code, position):
    with pytest.raises(NameRefused, match=rf"^the run name holds {kind} \(U\+{code}\) at position {position}:"):
        clean_name(name, what="run name", max_length=200)


@pytest.mark.parametrize(("given", "stored"), [
    ("BM25 réglé", "BM25 réglé"),
    ("  BM25  réglé  ", "BM25  réglé"),  # the ends only: inner spaces are the name's
    ("BM25 re\u0301gle\u0301", "BM25 réglé"),  # decomposed accents composed
    ("ａdmin", "admin"),  # full-width letters
    ("\ufb01le", "file"),  # the fi ligature
    ("\u00a0x\u3000", "x"),  # no-break and ideographic spaces are spaces
    ("a/b", "a/b"),
    ("...", "..."),
    ("v1.0/..x", "v1.0/..x"),
])
def test_a_name_is_stored_nfkc_normalised_without_spaces_at_its_ends(given, stored):
    assert clean_name(given, what="judge name", max_length=200) == stored


def test_the_length_is_counted_after_normalising():
    assert clean_name("x" * 200, what="judge name", max_length=200) == "x" * 200
    with pytest.raises(NameRefused, match="^the judge name has 201 characters: at most 200$"):
        clean_name("x" * 201, what="judge name", max_length=200)
    # 70 ligatures are 70 characters as given, 210 once each is "ffi".
    with pytest.raises(NameRefused, match="^the judge name has 210 characters: at most 200$"):
        clean_name("\ufb03" * 70, what="judge name", max_length=200)


@pytest.mark.parametrize("name", ["", "   ", "\u3000"])
def test_an_empty_name_is_refused(name):
    with pytest.raises(NameRefused, match=r"^the slug is empty: give it 1 to 64 characters$"):
        clean_name(name, what="slug", max_length=64)


@pytest.mark.parametrize(("name", "segment"), [("..", ".."), (".", "."), ("a/../b", ".."), ("x/.", ".")])
def test_a_dot_segment_that_a_browser_would_drop_is_refused(name, segment):
    with pytest.raises(NameRefused, match=rf"^the training set name has '{segment}' between slashes"):
        clean_name(name, what="training set name", max_length=200)


@pytest.mark.parametrize(("stored", "repaired"), [
    ("nl\njudge", "nl judge"),
    ("nl\r\nSet-Cookie: x=1", "nl Set-Cookie: x=1"),
    ("  evil\u202e\u200b  txt ", "evil txt"),
    ("ａdmin", "admin"),
    ("\n\t", ""),
    ("..", "__"),
    ("a/../b", "a/__/b"),
    ("x" * 198 + "\n yz", "x" * 198 + " y"),
])
def test_a_stored_name_is_repaired_to_keep_the_rule(stored, repaired):
    assert name_repaired(stored, max_length=200) == repaired


@pytest.mark.parametrize("stored", NASTY)
def test_a_repaired_name_keeps_the_rule_unchanged(stored):
    repaired = name_repaired(stored, max_length=200)
    assert len(repaired) <= 200
    if repaired:
        assert clean_name(repaired, what="name", max_length=200) == repaired
