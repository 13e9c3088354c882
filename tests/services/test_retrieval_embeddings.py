"""The passage embeddings cache: vectors equal sentence-transformers' own, a second call embeds nothing, a changed
passage is embedded again alone, a subset adds to the file, and the replaced file leaves the storage."""
from __future__ import annotations

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from labeling.models import PassageEmbeddings
from labeling.services.retrieval_embeddings import passage_embeddings
from models_llm.bundled import minilm_folder
from models_llm.retrieval.dense import DenseEncoder
from tests.factories import PassageFactory, ProjectFactory

pytestmark = pytest.mark.django_db

TEXTS = ["Scope 1 emissions fell by 12% in 2022.", "The board oversees climate-related risks.",
         "We plan to reach net zero by 2050.", "Water use rose at two plants.", "Physical risk: floods and heat.",
         "Our offices moved to renewable power."]


class Counting:
    """The encoder, keeping the texts of each call to encode."""

    def __init__(self, encoder: DenseEncoder) -> None:
        self.encoder, self.calls = encoder, []
        self.name, self.dimension = encoder.name, encoder.dimension

    def encode(self, texts, *, progress=None):
        self.calls.append(list(texts))
        return self.encoder.encode(texts, progress=progress)


@pytest.fixture(scope="module")
def minilm():
    return DenseEncoder(minilm_folder())


@pytest.fixture(scope="module")
def reference():
    model = SentenceTransformer(str(minilm_folder()), device="cpu", local_files_only=True)
    return lambda texts: model.encode(texts, normalize_embeddings=True)


@pytest.fixture
def passages():
    project = ProjectFactory()
    return project, [(PassageFactory(project=project, text=text).id, text) for text in TEXTS]


def stored(project, encoder):
    row = PassageEmbeddings.objects.get(project=project, model=encoder.name)
    with row.file.open("rb") as handle:
        data = np.load(handle)
        return row, dict(zip(data["ids"].tolist(), data["vectors"]))


def test_a_second_call_embeds_nothing_and_returns_the_same_vectors(passages, minilm, reference):
    project, items = passages
    encoder = Counting(minilm)
    first = passage_embeddings(project=project, encoder=encoder, passages=items)
    np.testing.assert_allclose(first, reference(TEXTS), atol=1e-5)
    assert first.dtype == np.float32 and encoder.calls == [TEXTS]

    seen = []
    again = passage_embeddings(project=project, encoder=encoder, passages=items,
                               progress=lambda done, total: seen.append((done, total)))
    assert encoder.calls == [TEXTS] and seen == [(6, 6)]
    np.testing.assert_array_equal(again, first)
    row, vectors = stored(project, encoder)
    assert (row.passages, row.dimension) == (6, 384) and sorted(vectors) == sorted(pid for pid, _ in items)


def test_a_changed_passage_is_embedded_again_alone_and_the_old_file_is_deleted(
    passages, minilm, reference, django_capture_on_commit_callbacks,
):
    project, items = passages
    encoder = Counting(minilm)
    passage_embeddings(project=project, encoder=encoder, passages=items)
    old = PassageEmbeddings.objects.get(project=project).file
    changed = list(items)
    changed[2] = (items[2][0], "We plan to reach net zero by 2040.")
    with django_capture_on_commit_callbacks(execute=True):
        vectors = passage_embeddings(project=project, encoder=encoder, passages=changed)
    assert encoder.calls[1:] == [["We plan to reach net zero by 2040."]]
    np.testing.assert_allclose(vectors, reference([text for _, text in changed]), atol=1e-5)
    row, _ = stored(project, encoder)
    assert row.file.name != old.name and row.file.storage.exists(row.file.name)
    assert not old.storage.exists(old.name)


def test_a_subset_adds_to_the_file_and_deleted_passages_leave_it(passages, minilm):
    project, items = passages
    encoder = Counting(minilm)
    passage_embeddings(project=project, encoder=encoder, passages=items[:3])
    passage_embeddings(project=project, encoder=encoder, passages=items[3:])
    assert encoder.calls == [TEXTS[:3], TEXTS[3:]]
    passage_embeddings(project=project, encoder=encoder, passages=items)
    assert len(encoder.calls) == 2
    assert sorted(stored(project, encoder)[1]) == sorted(pid for pid, _ in items)

    project.passages.filter(id=items[0][0]).delete()
    new = PassageFactory(project=project, text="A new passage.")
    passage_embeddings(project=project, encoder=encoder, passages=[(new.id, new.text)])
    assert encoder.calls[2:] == [["A new passage."]]
    assert sorted(stored(project, encoder)[1]) == sorted([pid for pid, _ in items[1:]] + [new.id])


def test_a_file_gone_from_the_storage_is_embedded_afresh(passages, minilm):
    project, items = passages
    encoder = Counting(minilm)
    passage_embeddings(project=project, encoder=encoder, passages=items)
    row = PassageEmbeddings.objects.get(project=project)
    row.file.storage.delete(row.file.name)
    passage_embeddings(project=project, encoder=encoder, passages=items)
    assert encoder.calls == [TEXTS, TEXTS]
    assert PassageEmbeddings.objects.filter(project=project).count() == 1
