"""The crisis double cascade's cut-offs (section 3.8): "the top 200 (or the top 10% of the corpus size if it is less
than 200)" of the filtered corpus, then "the top 10% of the documents" after the final re-ranking."""
from __future__ import annotations

import numpy as np
import pytest

from models_llm.retrieval.crisis import CrisisCutoffs, filtered_corpus
from models_llm.retrieval.hits import Hits


def test_the_dense_cut_is_200_or_a_tenth_of_the_filtered_corpus_when_smaller():
    cut = CrisisCutoffs()
    # 30 queries x 60 kept, no duplicates: 1,800 passages, a tenth 180 < 200; 3,000 -> 300, so 200.
    assert cut.dense_cut(1800) == 180
    assert cut.dense_cut(3000) == 200
    assert cut.dense_cut(2000) == 200
    assert cut.dense_cut(29) == 2  # 2.9 floored, as the released code's int(len * 0.1)
    assert cut.dense_cut(5) == 1  # never none while the corpus has a passage
    assert cut.dense_cut(0) == 0


def test_the_final_cut_keeps_a_tenth_rounded_up():
    cut = CrisisCutoffs()
    assert cut.final_keep(200) == 20
    assert cut.final_keep(180) == 18
    assert cut.final_keep(15) == 2
    assert cut.final_keep(3) == 1
    assert CrisisCutoffs(final_fraction=0.5).final_keep(3) == 2


@pytest.mark.parametrize("change", [{"lexical_keep": 201}, {"lexical_keep": 0}, {"dense_depth": 0},
                                    {"dense_fraction": 0.0}, {"final_fraction": 1.5}])
def test_impossible_cut_offs_are_refused(change):
    with pytest.raises(ValueError):
        CrisisCutoffs(**change)


def test_the_filtered_corpus_is_the_union_of_what_each_query_kept_each_once():
    kept = Hits(indices=[np.array([4, 1, 7]), np.array([7, 2]), np.zeros(0, np.int64)],
                scores=[np.ones(3), np.ones(2), np.zeros(0)])
    assert filtered_corpus(kept).tolist() == [1, 2, 4, 7]
