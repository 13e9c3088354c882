"""The perturbation audit's variants: padding gives exactly 512/1024 words with other queries' text after the
passage, stuffing adds each query word twice and nothing else, injection adds the judge-addressed sentence once at
a sentence boundary, and the probes are the same for the same items and seed."""
import random

import pytest

from models_llm.audit import (
    INJECTION,
    PERTURBATION_TESTS,
    AuditItem,
    OtherPassage,
    content_words,
    inject_sentence,
    pad_to_words,
    perturbation_probes,
    stuff_words,
)

NEUTRAL = ("harbour lantern copper meadow violet engine pillow orbit saddle timber quartz walnut ribbon canyon "
           "marble falcon cotton anchor glacier pepper").split()


def text(rng: random.Random, words: int) -> str:
    """Sentences of neutral words (none of them a query word)."""
    out, sentence = [], []
    for _ in range(words):
        sentence.append(rng.choice(NEUTRAL))
        if len(sentence) == 8:
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    if sentence:
        out.append(" ".join(sentence).capitalize() + ".")
    return " ".join(out)


def corpus(queries: int = 3, per_query: int = 4, seed: int = 0) -> tuple[list[AuditItem], list[OtherPassage]]:
    rng = random.Random(seed)
    items, others = [], []
    for q in range(queries):
        for d in range(per_query):
            key = f"d{q}-{d}"
            passage = text(rng, rng.randint(40, 120))
            items.append(AuditItem(item=str(100 + 10 * q + d), query_key=f"q{q}", doc_key=key,
                                   query=f"Does the firm assess {['flood', 'drought', 'storm'][q % 3]} exposure?",
                                   passage=passage, definition=f"definition {q}" if q else None, relevant=d % 2 == 0))
            others.append(OtherPassage(key=key, text=passage, query_keys=frozenset({f"q{q}"})))
    return items, others


def test_content_words_are_lowercased_without_stopwords_or_repeats():
    query = "Does the Company have a specific process in place to identify risks? The company's risks, climate-related."
    # By hand: does/the/have/a/in/to are stopwords; "risks" and "company" repeat (the second "company" is company's).
    assert content_words(query) == ["company", "specific", "process", "place", "identify", "risks", "company's",
                                    "climate-related"]


def test_padding_gives_exactly_the_words_asked_with_the_passage_first():
    passage = "Our plants were screened for floods.\nTwo sites need barriers."
    filler = ["alpha beta gamma.", "delta epsilon"]
    padded = pad_to_words(passage, filler, 20)
    assert padded.startswith(passage) and len(padded.split()) == 20
    # 10 words of the passage, then the filler's 5 words repeated: alpha .. epsilon alpha .. epsilon
    assert padded.split()[10:] == "alpha beta gamma. delta epsilon".split() * 2
    assert pad_to_words(passage, filler, 10) == passage  # already 10 words long: not padded
    assert pad_to_words(passage, [], 20) == passage


def test_stuffing_adds_each_word_twice_and_keeps_the_passage_in_order():
    passage = "Copper engine.\n\nMarble orbit saddle timber."
    stuffed = stuff_words(passage, ["flood", "risk"], random.Random(3))
    words = stuffed.split()
    assert words.count("flood") == 2 and words.count("risk") == 2 and len(words) == 6 + 4
    assert [w for w in words if w not in ("flood", "risk")] == passage.split()
    assert "\n\n" in stuffed  # the passage's own spacing is kept


def test_injection_adds_the_sentence_once_at_a_sentence_boundary():
    passage = "Copper engine works. Marble orbit? Saddle timber."
    seen = set()
    for seed in range(30):
        injected = inject_sentence(passage, random.Random(seed))
        assert injected.count(INJECTION) == 1
        before, after = injected.split(INJECTION)
        assert (before.strip() + " " + after.strip()).strip() == passage
        assert before.strip() == "" or before.strip()[-1] in ".?"
        seen.add(before.strip())
    assert seen == {"", "Copper engine works.", "Copper engine works. Marble orbit?", passage}


def test_probes_roles_indices_and_determinism():
    items, others = corpus()
    probes = perturbation_probes(items, others, tests=PERTURBATION_TESTS, seed=7)
    assert [p.pair.pair_id for p in probes] == list(range(len(probes)))
    assert probes == perturbation_probes(items, others, tests=PERTURBATION_TESTS, seed=7)
    assert probes != perturbation_probes(items, others, tests=PERTURBATION_TESTS, seed=8)
    roles = {}
    for probe in probes:
        roles.setdefault(probe.item, []).append(probe.role)
    for item in items:
        expected = ["original", "length512", "length1024", "stuffing_base", "stuffing", "injection"]
        expected += ["definition"] if item.definition else []  # no definition: nothing to leave out
        expected += ["consistency_a", "consistency_b"]
        assert roles[item.item] == expected
    by = {(p.item, p.role): p for p in probes}
    for item in items:
        original = by[item.item, "original"].pair
        assert original.passage == item.passage and original.definition == item.definition
        for words in (512, 1024):
            padded = by[item.item, f"length{words}"]
            assert padded.pad == words and len(padded.pair.passage.split()) == words
            assert padded.pair.passage.startswith(item.passage)
        assert by[item.item, "length1024"].pair.passage.startswith(by[item.item, "length512"].pair.passage)
        base = by[item.item, "stuffing_base"]
        if item.relevant:  # relevant by gold: a passage of another query instead
            assert base.doc_key != item.doc_key and not base.doc_key.startswith(f"d{item.query_key[1:]}-")
        else:
            assert base.doc_key == item.doc_key and base.pair.passage == item.passage
        assert by[item.item, "stuffing"].pair.passage.split().count("flood" if item.query_key == "q0" else
                                                                     "drought" if item.query_key == "q1" else
                                                                     "storm") == 2
        if item.definition:
            assert by[item.item, "definition"].pair.definition is None
        assert by[item.item, "consistency_a"].sampled and by[item.item, "consistency_b"].sampled
        assert not by[item.item, "original"].sampled


def test_padding_borrows_only_other_queries_text():
    items, others = corpus(queries=2, per_query=3)
    # Each query's passages get a marker word only they contain.
    marked = [OtherPassage(o.key, o.text + f" MARK{min(o.query_keys)}", o.title, o.query_keys) for o in others]
    probes = perturbation_probes(items, marked, tests=["length"], seed=1)
    for probe in probes:
        if probe.role.startswith("length"):
            added = probe.pair.passage.split()[len(next(i for i in items if i.item == probe.item).passage.split()):]
            assert f"MARK{probe.query_key}" not in added and any(w.startswith("MARK") for w in added)


def test_an_item_keeps_its_variants_when_the_sample_grows_and_long_passages_are_not_padded():
    items, others = corpus()
    long = AuditItem(item="999", query_key="q0", doc_key="long", query="Does it flood?", passage="word " * 600)
    alone = perturbation_probes(items[:2], others, tests=PERTURBATION_TESTS, seed=0)
    more = perturbation_probes([*items[:2], long], others, tests=PERTURBATION_TESTS, seed=0)
    assert [p.pair for p in alone] == [p.pair for p in more[:len(alone)]]
    roles = [p.role for p in more if p.item == "999"]
    assert "length512" not in roles and "length1024" in roles  # 600 words: padded to 1024 only


def test_without_other_queries_nothing_is_borrowed():
    items, others = corpus(queries=1)
    probes = perturbation_probes(items, others, tests=["length", "injection"], seed=0)
    roles = {(p.item, p.role) for p in probes}
    for item in items:
        assert (item.item, "length512") not in roles
        # injection without stuffing still gets its stuffing_base; a relevant item has no base to borrow
        assert ((item.item, "stuffing_base") in roles) == (not item.relevant)
        assert ((item.item, "injection") in roles) == (not item.relevant)


def test_unknown_test_is_refused():
    with pytest.raises(ValueError, match="bogus"):
        perturbation_probes([], [], tests=["bogus"], seed=0)
