"""Write queries.jsonl, corpus.jsonl and pairs.tsv of this bundle from items.json (standard library only):
`python make.py` in this folder. Each item lists K conditions as [query phrase, sentence meeting it, near-miss
sentence]; the item gets an instruction and a descriptive query for k = 1..K (its first k conditions) and documents
d_0..d_K, where d_s has the meeting sentences of the first s conditions and the near misses of the others."""
from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _instruction(noun: str, phrases: list[str]) -> str:
    return f"Find a {noun} that: " + "; ".join(f"{i}) {p}" for i, p in enumerate(phrases, 1)) + "."


def _descriptive(noun: str, phrases: list[str]) -> str:
    listed = phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]
    return f"I am looking for a {noun} that {listed}."


def main() -> None:
    spec = json.loads((HERE / "items.json").read_text())
    queries, corpus, pairs = [], [], ["query-id\tcorpus-id"]
    for item in spec["items"]:
        name, domain, conditions = item["item"], item["domain"], item["conditions"]
        noun, phrases = spec["domains"][domain], [c[0] for c in conditions]
        documents = [f"{name}-doc-{s}" for s in range(len(conditions) + 1)]
        for style, write in (("instruction", _instruction), ("descriptive", _descriptive)):
            for k in range(1, len(conditions) + 1):
                key = f"{name}-{style[:3]}-{k}"
                queries.append({"_id": key, "text": write(noun, phrases[:k]), "metadata": {"multicondition": {
                    "item": name, "domain": domain, "k": k, "style": style, "conditions": phrases[:k]}}})
                pairs += [f"{key}\t{document}" for document in documents]
        for s, key in enumerate(documents):
            text = " ".join(c[1] if i < s else c[2] for i, c in enumerate(conditions))
            corpus.append({"_id": key, "text": text, "metadata": {"multicondition": {"item": name, "satisfies": s}}})
    for file, records in (("queries.jsonl", queries), ("corpus.jsonl", corpus)):
        (HERE / file).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    (HERE / "pairs.tsv").write_text("\n".join(pairs) + "\n")


if __name__ == "__main__":
    main()
