"""Query-term highlighting splits the passage into segments; joined they give back the text unchanged."""
from labeling.highlight import Segment, highlight_segments, query_terms


def test_terms_drop_stopwords_short_words_and_duplicates_longest_first():
    assert query_terms("What are the company's GHG emission targets for the emission of CO2?") == [
        "emission", "company", "target", "co2", "ghg",
    ]


def test_matches_are_word_prefixes_case_insensitive():
    segments = highlight_segments("Emissions fell; the target emission-free fleet.", "emission targets")
    assert [s.text for s in segments if s.hit] == ["Emissions", "target", "emission"]
    assert "".join(s.text for s in segments) == "Emissions fell; the target emission-free fleet."


def test_markup_in_the_passage_stays_text_in_a_segment():
    text = "<script>alert('emission')</script> emission"
    segments = highlight_segments(text, "emission")
    assert "".join(s.text for s in segments) == text
    assert Segment("emission", True) in segments
    assert segments[0] == Segment("<script>alert('", False)


def test_regex_characters_in_the_query_are_literal():
    assert highlight_segments("costs (usd) rose", "cost (usd)+?") == [
        Segment("costs", True), Segment(" (", False), Segment("usd", True), Segment(") rose", False),
    ]


def test_no_terms_gives_one_plain_segment():
    assert highlight_segments("anything", "the of a") == [Segment("anything", False)]
    assert highlight_segments("", "emission") == []


def test_a_plural_in_the_query_also_finds_the_singular():
    segments = highlight_segments("One company, two companies; a batch of batches; the glass.", "companies batches glass")
    assert [s.text for s in segments if s.hit] == ["company", "companies", "batch", "batches", "glass"]
