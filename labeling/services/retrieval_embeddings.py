"""The passage embeddings a dense retriever keeps per project and encoder (PassageEmbeddings): one .npz file in the
storage, read whole, so a later run embeds only the passages that are new or whose text changed, and an embedding
judge on the same model embeds none of them again."""
from __future__ import annotations

import hashlib
import io
import threading
from collections.abc import Sequence

import numpy as np
from django.core.files.base import ContentFile
from django.db import transaction

from labeling.models import Passage, PassageEmbeddings, Project
from models_llm.retrieval.dense import DenseEncoder
from models_llm.retrieval.hits import ProgressFn


def text_hash(text: str) -> int:
    """The 8-byte blake2b digest of the embedded text as an integer: what tells a changed passage from the one
    embedded before (the file keeps it as uint64)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def passage_embeddings(
    *, project: Project, encoder: DenseEncoder, passages: Sequence[tuple[int, str]], progress: ProgressFn | None = None,
) -> np.ndarray:
    """float32 unit vectors (len(passages), dimension) for `passages` ((passage id, embedded text), any subset of
    the project's), in that order. Passages embedded before with the same text by the same encoder come from the
    stored file; the others are embedded (`progress` counts all of `passages`, the stored ones done at once) and
    the file is written anew with them, keeping what it held for the project's other passages."""
    ids, hashes, stored, found, reused = _lookup(project=project, encoder=encoder, passages=passages)
    stored_ids, stored_hashes, stored_vectors = stored
    missing = np.flatnonzero(~reused)
    done = len(passages) - len(missing)
    if progress is not None:
        progress(done, len(passages))
    vectors = np.zeros((len(passages), encoder.dimension), np.float32)
    vectors[reused] = stored_vectors[found[reused]]
    if not len(missing):
        return vectors
    texts = [passages[i][1] for i in missing]
    vectors[missing] = encoder.encode(
        texts, progress=None if progress is None else lambda d, _t: progress(done + d, len(passages)))
    # The file keeps the passages embedded before that this call did not ask for (a cascade embeds only its
    # candidates), unless they were deleted from the project since.
    kept = np.isin(stored_ids, ids, invert=True)
    kept[kept] = np.isin(stored_ids[kept], list(Passage.objects.filter(project=project).values_list("id", flat=True)))
    _write(project=project, encoder=encoder, ids=np.concatenate([stored_ids[kept], ids]),
           hashes=np.concatenate([stored_hashes[kept], hashes]),
           vectors=np.concatenate([stored_vectors[kept], vectors]))
    return vectors


def embeddings_missing(*, project: Project, encoder: DenseEncoder, passages: Sequence[tuple[int, str]]) -> np.ndarray:
    """The positions in `passages` ((passage id, embedded text)) that passage_embeddings would embed: not stored
    for this encoder, or stored for another text. Reads the file, embeds nothing."""
    return np.flatnonzero(~_lookup(project=project, encoder=encoder, passages=passages)[4])


def stored_passage_vectors(*, project_id: int, model: str, passages: Sequence[tuple[int, str]]
                           ) -> dict[str, np.ndarray]:
    """Embedded text -> its stored float32 unit vector, for those of `passages` ((passage id, embedded text)) that
    the encoder named `model` (DenseEncoder.name) embedded from that same text; embeds nothing. The last file read
    is kept in this process until it is replaced, so the parts of a scoring job read it once."""
    row = PassageEmbeddings.objects.filter(project_id=project_id, model=model).first()
    if row is None or not row.file.name or not passages:
        return {}
    ids, hashes, vectors = _stored_file(row)
    position = {int(passage_id): i for i, passage_id in enumerate(ids)}
    found = {}
    for passage_id, text in passages:
        i = position.get(passage_id)
        if i is not None and hashes[i] == text_hash(text):
            found[text] = vectors[i]
    return found


# The last stored file an embedding judge read, by (row, file name, write time): a rewritten file is saved under a
# new name, but a deleted file's name can come back, so its time tells the two apart.
_last_file: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
_last_file_lock = threading.Lock()


def _stored_file(row: PassageEmbeddings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    key = (row.id, row.file.name, row.updated_at)
    with _last_file_lock:
        if key in _last_file:
            return _last_file[key]
    data = _read_file(row, dimension=row.dimension)
    with _last_file_lock:
        _last_file.clear()
        _last_file[key] = data
    return data


def _lookup(*, project: Project, encoder: DenseEncoder, passages: Sequence[tuple[int, str]]):
    """(ids, hashes, the stored (ids, hashes, vectors), each passage's position in them or -1, whether it is
    reused)."""
    ids = np.fromiter((passage_id for passage_id, _ in passages), np.int64, len(passages))
    hashes = np.fromiter((text_hash(text) for _, text in passages), np.uint64, len(passages))
    stored = _read(project=project, encoder=encoder)
    position = {int(passage_id): i for i, passage_id in enumerate(stored[0])}
    found = np.array([position.get(int(passage_id), -1) for passage_id in ids], np.int64)
    reused = found >= 0
    reused[reused] = stored[1][found[reused]] == hashes[reused]
    return ids, hashes, stored, found, reused


def _read(*, project: Project, encoder: DenseEncoder) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, hashes, vectors) stored for the project and encoder; nothing when there is no file, or when it was
    replaced and deleted between reading the row and opening it (the caller then embeds afresh)."""
    row = PassageEmbeddings.objects.filter(project=project, model=encoder.name).first()
    if row is None or not row.file.name:
        return _empty(encoder.dimension)
    return _read_file(row, dimension=encoder.dimension)


def _empty(dimension: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros((0, dimension), np.float32)


def _read_file(row: PassageEmbeddings, *, dimension: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, hashes, vectors) in the row's file; nothing when the file is gone or its vectors are not `dimension`
    wide."""
    empty = _empty(dimension)
    try:
        with row.file.storage.open(row.file.name, "rb") as handle:
            data = np.load(io.BytesIO(handle.read()), allow_pickle=False)
    except FileNotFoundError:
        return empty
    vectors = data["vectors"].astype(np.float32)
    if vectors.ndim != 2 or vectors.shape[1] != dimension:
        return empty
    return data["ids"].astype(np.int64), data["hashes"].astype(np.uint64), vectors


def _write(*, project: Project, encoder: DenseEncoder, ids: np.ndarray, hashes: np.ndarray,
           vectors: np.ndarray) -> None:
    """Store the file under a new name, point the row at it, and delete the file it replaces once that commits: a
    reader on another machine holding the old name meanwhile still finds a whole file, never a half-written one."""
    buffer = io.BytesIO()
    np.savez(buffer, ids=ids, hashes=hashes, vectors=vectors)
    field = PassageEmbeddings._meta.get_field("file")
    model_key = hashlib.blake2b(encoder.name.encode(), digest_size=6).hexdigest()
    name = field.storage.save(field.generate_filename(None, f"project-{project.id}-{model_key}.npz"),
                              ContentFile(buffer.getvalue()))
    try:
        with transaction.atomic():
            row, created = PassageEmbeddings.objects.select_for_update().get_or_create(
                project=project, model=encoder.name,
                defaults={"file": name, "passages": len(ids), "dimension": vectors.shape[1]})
            if not created:
                old = row.file.name
                row.file.name, row.passages, row.dimension = name, len(ids), vectors.shape[1]
                row.save(update_fields=["file", "passages", "dimension", "updated_at"])
                if old and old != name:
                    transaction.on_commit(lambda: field.storage.delete(old))
    except BaseException:
        field.storage.delete(name)
        raise
