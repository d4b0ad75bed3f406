"""The same semantics from every backend: hits with passages, replace, delete, filters, safety."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lmk_rag import LMKEncoder
from lmk_rag.passages import locate_passage

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "sample_corpus"
NAMES = sorted(p.name for p in CORPUS.glob("*.md"))
TEXTS = [(CORPUS / n).read_text(encoding="utf-8") for n in NAMES]
META = [{"topic": n.split(".")[0], "n": i, "public": i % 2 == 0} for i, n in enumerate(NAMES)]


@pytest.fixture()
def index(make_index):
    idx = make_index()
    idx.add(TEXTS, ids=NAMES, metadatas=META)
    return idx


def test_search_finds_document_and_passage(index):
    # A factoid in one landmark of a short, topical document: the single best landmark names it.
    hits = index.search("How many copies of the Gutenberg Bible were printed?", k=3, passage="peak")
    top = hits[0]
    assert top.id == "printing_press.md" and top.metadata == META[NAMES.index("printing_press.md")]
    assert "180 copies" in top.passage and top.text == TEXTS[NAMES.index("printing_press.md")]
    assert top.text[top.span[0] : top.span[1]] == top.passage
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len({h.id for h in hits}) == 3


def test_modes_agree_on_an_easy_query(index):
    for mode in index.modes:
        assert index.search("sourdough starter hooch", k=1, mode=mode)[0].id == "sourdough.md"


def test_passage_rules_pick_the_landmarks_they_promise_in_every_mode(index):
    """``region`` (the default) names the landmark whose neighbourhood matches best, ``peak`` the
    single best landmark: both computed from all of the document's landmarks, whatever the mode."""
    query, doc = "How often should I oil my bicycle chain?", "bicycle_maintenance.md"
    q = index.encoder.encode_query(query)
    sims = index.encoder.encode_multi([TEXTS[NAMES.index(doc)]])[0].vectors @ q
    assert locate_passage(sims, "region") != int(np.argmax(sims))  # the two rules disagree on this document
    for mode in index.modes:
        for rule, expected in (("region", locate_passage(sims, "region")), ("peak", int(np.argmax(sims)))):
            hits = index.search(query, k=3, mode=mode, passage=rule)
            hit = next(h for h in hits if h.id == doc)
            assert hit.landmark == expected, (mode, rule)
            assert hit.text[hit.span[0] : hit.span[1]] == hit.passage
        assert (
            index.search(query, k=3, mode=mode)[0].landmark
            == index.search(query, k=3, mode=mode, passage="region")[0].landmark
        )
    with pytest.raises(ValueError, match="passage must be one of"):
        index.search(query, passage="best")


def test_neighbours_widen_the_passage(index):
    narrow = index.search("Bay of Fundy tidal range", k=1)[0]
    wide = index.search("Bay of Fundy tidal range", k=1, neighbours=1)[0]
    assert narrow.passage in wide.passage and len(wide.passage) > len(narrow.passage)


def test_readding_replaces_without_duplicates_or_stale_landmarks(index, make_index):
    assert len(index) == 5
    new_text = "Bicycles: the quokka-shaped bell is the rarest accessory. " * 3
    index.add([new_text], ids=["bicycle_maintenance.md"], metadatas=[{"topic": "bells"}])
    assert len(index) == 5
    doc = index.get(["bicycle_maintenance.md"])[0]
    assert doc.text == new_text and doc.metadata == {"topic": "bells"}
    hit = index.search("tyre pressure psi road tyres", k=5)
    assert all(h.id != "bicycle_maintenance.md" or "psi" not in h.passage for h in hit)
    assert index.search("rarest bicycle bell accessory", k=1)[0].id == "bicycle_maintenance.md"
    if make_index.kind.startswith("chroma"):
        assert index.landmarks.count() == sum(len(d.spans) for d in index.get(NAMES))


def test_get_delete_count(index):
    assert [d.id for d in index.get(["tides.md", "missing", "sourdough.md"])] == ["tides.md", "sourdough.md"]
    assert [d.id for d in index.get(i for i in ["tides.md"])] == ["tides.md"]  # any iterable of ids
    index.delete(["tides.md", "missing"])
    index.delete([])
    assert len(index) == 4 and index.get(["tides.md"]) == []
    assert all(h.id != "tides.md" for h in index.search("spring and neap tides", k=4))


def test_metadata_filters_equality_and(index):
    hits = index.search("how things work", k=5, filter={"public": True})
    assert {h.id for h in hits} == {NAMES[i] for i in range(5) if i % 2 == 0}
    hits = index.search("how things work", k=5, filter={"public": True, "topic": "tides"})
    assert [h.id for h in hits] == ["tides.md"]
    assert index.search("anything", k=3, filter={"topic": "nope"}) == []


def test_fingerprint_mismatch_is_refused(index, make_index, tiny_bert_dir):
    other = LMKEncoder("sentence-transformers/all-MiniLM-L6-v2", granularity=64, device="cpu")
    with pytest.raises(ValueError, match="granularity: 32 != 64"):
        make_index(other)
    again = make_index()  # the same encoder reopens it
    assert len(again) == 5


def test_bad_input(index):
    with pytest.raises(ValueError, match="duplicates"):
        index.add(["a", "b"], ids=["x", "x"])
    with pytest.raises(ValueError, match="metadatas"):
        index.add(["a"], ids=["x"], metadatas=[{}, {}])
    with pytest.raises(TypeError, match="metadatas"):
        index.add(["a"], ids=["x"], metadatas=[{"nested": {"no": 1}}])
    with pytest.raises(TypeError, match="texts"):
        index.add("a bare string", ids=["x"])
    with pytest.raises(ValueError, match="k must"):
        index.search("q", k=0)
    with pytest.raises(ValueError, match="mode must be one of"):
        index.search("q", mode="fuzzy")
    with pytest.raises(TypeError, match="filter"):
        index.search("q", filter={"topic": ["a", "b"]})
    assert len(index) == 5  # nothing half-written


def test_context_fits_the_budget_and_maps_back_to_the_stored_text(index):
    """``index.context``: passages best first from the documents found, each exactly the stored
    text at its span, none repeating another's text, their tokens within the budget."""
    for mode in index.modes:
        passages = index.context("How many copies of the Gutenberg Bible were printed?", 256, mode=mode)
        assert passages and passages[0].id == "printing_press.md" and "180 copies" in passages[0].text
        assert sum(p.tokens for p in passages) <= 256
        assert sum(index.encoder.count_tokens([p.text for p in passages])) <= 256
        for p in passages:
            stored = TEXTS[NAMES.index(p.id)]
            assert p.text == stored[p.span[0] : p.span[1]] and p.metadata == META[NAMES.index(p.id)]
        by_doc: dict[str, list[tuple[int, int]]] = {}
        for p in passages:
            by_doc.setdefault(p.id, []).append(p.span)
        for spans in by_doc.values():
            spans.sort()
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_context_filters_counts_with_the_users_counter_and_handles_edges(index, make_index):
    only = index.context("tides and the moon", 128, filter={"topic": "sourdough"})
    assert only and {p.id for p in only} == {"sourdough.md"}
    words = index.context("tides and the moon", 50, token_counter=lambda s: len(s.split()))
    assert sum(len(p.text.split()) for p in words) <= 50 and words[0].id == "tides.md"
    tiny = index.context("Bay of Fundy tidal range", 2)  # less than one landmark: one clipped passage
    assert len(tiny) == 1 and 0 < tiny[0].tokens <= 2
    one_doc = index.context("tides", 10_000, k=1)
    assert {p.id for p in one_doc} == {"tides.md"} and "".join(p.text for p in one_doc).strip()
    for bad in (0, -5, 2.5, "512"):
        with pytest.raises(ValueError, match="max_tokens must be an int >= 1"):
            index.context("tides", bad)
    with pytest.raises(ValueError, match="token_counter raised ZeroDivisionError"):
        index.context("tides", 64, token_counter=lambda s: 1 // 0)
    index.delete(NAMES)
    assert index.context("tides", 512) == []


def test_get_encoded_returns_the_stored_vectors_in_the_order_asked(index):
    fresh = index.encoder.encode_multi([TEXTS[NAMES.index("tides.md")]])[0]
    found = index.get_encoded(["tides.md", "missing", "sourdough.md"])
    assert [doc.id for doc, _ in found] == ["tides.md", "sourdough.md"]
    doc, mv = found[0]
    assert doc.text == TEXTS[NAMES.index("tides.md")] and mv.spans == fresh.spans
    assert np.allclose(mv.vectors, fresh.vectors, atol=1e-3) and np.allclose(mv.pooled, fresh.pooled, atol=1e-3)
    assert index.get_encoded([]) == []


def test_an_index_used_after_close_says_so(make_index):
    idx = make_index()
    idx.add(["Spring tides come at new and full moon."], ids=["tides"])
    idx.close()
    idx.close()  # twice is fine
    for use in (lambda: idx.search("tides"), lambda: len(idx), lambda: idx.get(["tides"]), lambda: idx.context("x")):
        with pytest.raises(RuntimeError, match="was closed; open the index again"):
            use()


def test_a_hits_span_is_its_passages_span_in_every_mode_and_width(make_index):
    """hit.span is (start, end) of hit.passage in the stored text whatever the mode and neighbours
    (it was the matched landmark's own span, narrower than the passage, #46 item 2)."""
    idx = make_index()
    text = " ".join(f"Sentence {i} tells of tides, bread and solar inverters in turn." for i in range(40))
    idx.add([text, "A short note on kettles."], ids=["long", "short"])
    for mode in idx.modes:
        for neighbours in (0, 1, 3):
            for hit in idx.search("solar inverters", k=2, mode=mode, neighbours=neighbours):
                start, end = hit.span
                assert hit.text[start:end] == hit.passage
                assert start <= hit.landmark_span[0] <= hit.landmark_span[1] <= end
                assert -1.0 <= hit.similarity <= 1.0 + 1e-5


def test_one_name_for_the_filter_everywhere_and_the_old_one_says_the_new(make_index):
    """search, context and ids all take filter= (context and ids took where=, #46 item 7)."""
    index = make_index()
    index.add(["Tides and the moon.", "Bread and yeast."], ids=["t", "b"], metadatas=[{"n": 1}, {"n": 2}])
    assert index.ids(filter={"n": 1}) == ["t"] == index.ids({"n": 1})
    assert {p.id for p in index.context("tides", 128, filter={"n": 2})} == {"b"}
    for call in (lambda: index.context("tides", 128, where={"n": 2}), lambda: index.ids(where={"n": 1})):
        with pytest.raises(TypeError, match=r"takes filter= \(formerly where=\)"):
            call()
    with pytest.raises(TypeError, match="unexpected keyword argument 'wher'"):
        index.ids(wher={"n": 1})
