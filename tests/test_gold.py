"""Gold-grade rules, checked on hand-made cases."""
from labeling.gold import LabelView, gold_grade


def label(grade: int, role: str = "annotator", label_id: int = 1) -> LabelView:
    return LabelView(grade=grade, role=role, label_id=label_id)


def test_reference_grade_wins_over_annotators_and_an_adjudication_over_the_reference():
    assert gold_grade(0, [label(2), label(2, label_id=2)]) == 0
    assert gold_grade(0, [label(2), label(1, "adjudicator", 2)]) == 1


def test_newest_adjudicator_label_wins_over_annotators():
    labels = [label(2, label_id=1), label(2, label_id=2), label(1, "adjudicator", 3), label(0, "adjudicator", 7)]
    assert gold_grade(None, labels) == 0


def test_agreeing_annotators_give_their_grade():
    assert gold_grade(None, [label(1, label_id=1), label(1, label_id=2)]) == 1


def test_disagreement_or_no_labels_is_unresolved():
    assert gold_grade(None, [label(1, label_id=1), label(2, label_id=2)]) is None
    assert gold_grade(None, []) is None
