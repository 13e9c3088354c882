"""The definition diff on hand-made examples, and the history with its per-version counts."""
from __future__ import annotations

import time

import pytest
from django.utils import timezone

from labeling.models import RelevanceDefinition
from labeling.selectors.definitions import (
    current_definition,
    definition_diff,
    definition_history,
    definition_versions,
)
from labeling.textdiff import DiffBlock, DiffPiece
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    LabelFactory,
    PairFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)


def diff(old: str | None, new: str):
    return definition_diff(older=None if old is None else RelevanceDefinition(text=old),
                           newer=RelevanceDefinition(text=new))


def sides(result) -> tuple[str, str]:
    """The old and the new text read back from the pieces (only meaningful when nothing was skipped)."""
    pieces = [piece for block in result.blocks for piece in block.pieces]
    old = "".join(p.text for p in pieces if p.op != "insert")
    new = "".join(p.text for p in pieces if p.op != "delete")
    return old, new


def test_changed_words_show_as_whole_words_with_spaces_outside_the_change():
    old = "Relevant if the passage names a target. Not if it is vague."
    new = "Relevant if the passage names a 2030 target. Vague pledges are not relevant."
    result = diff(old, new)
    assert result.blocks == (
        DiffBlock(pieces=(
            DiffPiece("equal", "Relevant if the passage names a "),
            DiffPiece("insert", "2030 "),
            DiffPiece("equal", "target. "),
            DiffPiece("delete", "Not if it is vague"),
            DiffPiece("insert", "Vague pledges are not relevant"),
            DiffPiece("equal", "."),
        )),
    )
    # Hand count: inserted "2030", "Vague", "pledges", "are", "not", "relevant"; removed "Not", "if",
    # "it", "is", "vague".
    assert (result.words_added, result.words_removed) == (6, 5)
    assert sides(result) == (old, new)


def test_replaced_neighbouring_words_read_as_one_change():
    result = diff("the cat sat", "a dog sat")
    assert result.blocks[0].pieces == (
        DiffPiece("delete", "the cat"), DiffPiece("insert", "a dog"), DiffPiece("equal", " sat"),
    )


def test_a_word_kept_before_other_punctuation_or_new_words_is_not_shown_as_changed():
    old = "Names a net-zero target.\n\nGeneral talk is not relevant."
    new = "Names a net-zero target (a year such as 2050).\n\nGeneral talk is not relevant. Pledges are partly relevant."
    result = diff(old, new)
    assert result.blocks[0].pieces == (
        DiffPiece("equal", "Names a net-zero target"),
        DiffPiece("insert", " (a year such as 2050)"),
        DiffPiece("equal", ".\n\nGeneral talk is not relevant."),
        DiffPiece("insert", " Pledges are partly relevant."),
    )
    # Hand count: "a", "year", "such", "as", "2050", "Pledges", "are", "partly", "relevant".
    assert (result.words_added, result.words_removed) == (9, 0)
    assert sides(result) == (old, new)


def test_whole_lines_added_and_removed():
    result = diff("Scope 1 counts.\nScope 3 does not.\n", "Scope 1 counts.\nScope 2 counts too.\n")
    assert result.blocks[0].pieces == (
        DiffPiece("equal", "Scope 1 counts.\nScope "),
        DiffPiece("delete", "3 does not"),
        DiffPiece("insert", "2 counts too"),
        DiffPiece("equal", ".\n"),
    )
    appended = diff("one\n", "one\ntwo\n")
    assert appended.blocks[0].pieces == (DiffPiece("equal", "one\n"), DiffPiece("insert", "two\n"))
    assert (appended.words_added, appended.words_removed) == (1, 0)
    # The last line has no line break: a paragraph added after it is one insertion, not a rewrite of it.
    after_last = diff("Relevant: targets.", "Relevant: targets.\n\nNot relevant: slogans.")
    assert after_last.blocks[0].pieces == (
        DiffPiece("equal", "Relevant: targets."), DiffPiece("insert", "\n\nNot relevant: slogans."),
    )
    assert sides(after_last) == ("Relevant: targets.", "Relevant: targets.\n\nNot relevant: slogans.")
    removed_last = diff("one\ntwo", "one\n")
    assert removed_last.blocks[0].pieces == (DiffPiece("equal", "one\n"), DiffPiece("delete", "two"))


def test_long_unchanged_stretches_are_counted_not_shown():
    lines = [f"line {i}\n" for i in range(20)]
    changed = list(lines)
    changed[10] = "line ten\n"
    result = diff("".join(lines), "".join(changed))
    # Three lines of context either side of line 10: lines 0-6 and 14-19 are left out.
    assert [block.skipped_lines for block in result.blocks] == [7, 0, 6]
    shown = result.blocks[1].pieces
    assert shown == (
        DiffPiece("equal", "line 7\nline 8\nline 9\nline "),
        DiffPiece("delete", "10"),
        DiffPiece("insert", "ten"),
        DiffPiece("equal", "\nline 11\nline 12\nline 13\n"),
    )


def test_first_version_is_all_inserted_and_identical_texts_have_no_blocks():
    first = diff(None, "Anything about methane.")
    assert first.blocks == (DiffBlock(pieces=(DiffPiece("insert", "Anything about methane."),)),)
    assert first.words_added == 3
    assert diff("same", "same").blocks == ()


def test_markup_in_texts_stays_plain_text_in_the_pieces():
    result = diff("<b>bold</b>", "<script>alert(1)</script>")
    assert sides(result) == ("<b>bold</b>", "<script>alert(1)</script>")


def test_a_small_edit_in_a_long_paragraph_is_found_quickly():
    sentences = [f"Sentence {i} talks about emissions target number {i}." for i in range(1200)]
    old = " ".join(sentences)
    sentences[600] = "Sentence 600 talks about an entirely different thing."
    new = " ".join(sentences)
    started = time.perf_counter()
    result = diff(old, new)
    assert time.perf_counter() - started < 2.0
    assert sides(result) == (old, new)
    assert [p.text for p in result.blocks[0].pieces if p.op == "delete"] == ["emissions target number 600"]
    assert [p.text for p in result.blocks[0].pieces if p.op == "insert"] == ["an entirely different thing"]


@pytest.mark.django_db
def test_history_is_newest_first_with_authors_and_counts():
    query = QueryFactory()
    author = UserFactory(username="editor")
    v1 = RelevanceDefinitionFactory(query=query, text="v1 text")
    v2 = RelevanceDefinitionFactory(query=query, text="v2 text", author=author)
    pair = PairFactory(project=query.project, query=query)
    LabelFactory(pair=pair, definition=v1, superseded_at=timezone.now())  # superseded: not counted
    LabelFactory(pair=pair, definition=v1)
    LabelFactory(pair=pair, definition=v2)
    LabelFactory(pair=pair, definition=v2)
    JudgmentFactory(pair=pair, definition=v1)
    history = list(definition_history(query=query))
    assert [(d.version, d.author, d.label_count, d.judgment_count) for d in history] == [
        (2, author, 2, 0), (1, None, 1, 1),
    ]
    versions = definition_versions(query=query)
    assert [v.definition.version for v in versions] == [2, 1]
    assert versions[0].diff.blocks[0].pieces == (
        DiffPiece("delete", "v1"), DiffPiece("insert", "v2"), DiffPiece("equal", " text"),
    )
    assert versions[1].diff.words_added == 2


@pytest.mark.django_db
def test_drafts_are_never_current_and_each_version_is_compared_with_what_it_changes():
    query = QueryFactory()
    judge = JudgeFactory(project=query.project, name="gpt", backend="openai")

    def draft(text: str) -> RelevanceDefinition:
        return RelevanceDefinitionFactory(query=query, text=text, is_draft=True, origin="llm_draft", drafted_by=judge)

    first_draft = draft("drafted before anyone wrote one")  # v1
    RelevanceDefinitionFactory(query=query, text="in use")  # v2
    reviewed = draft("drafted and then reviewed")  # v3
    draft("drafted and left alone")  # v4
    RelevanceDefinitionFactory(query=query, text="drafted and then reviewed, and edited", based_on=reviewed,
                               origin="llm_draft", drafted_by=judge)  # v5
    assert current_definition(query=query).version == 5
    draft("the newest draft")  # v6
    assert current_definition(query=query).version == 5

    versions = definition_versions(query=query)
    # A draft against the definition in use before it, a reviewed version against its draft.
    assert [(v.definition.version, v.compared_to, v.is_current, v.reviewed_as) for v in versions] == [
        (6, 5, False, ()), (5, 3, True, ()), (4, 2, False, ()), (3, 2, False, (5,)), (2, None, False, ()),
        (1, None, False, ()),
    ]
    by_version = {v.definition.version: v for v in versions}
    assert [p for p in by_version[5].diff.blocks[0].pieces if p.op != "equal"] == [
        DiffPiece("insert", ", and edited")]
    # Nothing in use before them: the whole text is new.
    assert by_version[2].diff.words_added == 2 and by_version[1].diff.words_added == 5
    assert first_draft.is_draft

