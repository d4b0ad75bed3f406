"""Training on a tiny model: loss goes down, save/reload is exact, resume continues exactly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from lmk_rag import LMKEncoder
from lmk_rag.train import TrainConfig, Trainer, load_pairs, save_pairs
from lmk_rag.train.data import Pair
from lmk_rag.train.student import landmark_forward

ROOT = Path(__file__).resolve().parents[1]

TEXTS = {
    "tides.txt": "Spring tides come at new and full moon when the Sun and Moon line up. Neap tides come at the "
    "quarter moons. The Bay of Fundy has a tidal range of sixteen metres. Storm surges raise the sea.",
    "bread.txt": "A sourdough starter is fed daily with flour and water. Grey liquid on top means it is hungry. "
    "Bulk fermentation takes four to six hours at room temperature. Bake at 250 degrees.",
    "bike.txt": "Check tyre pressure every week because tubes lose air slowly. Oil each chain roller once. "
    "Replace a chain stretched by three quarters of a percent. Adjust the barrel a quarter turn.",
}


@pytest.fixture()
def text_folder(tmp_path):
    folder = tmp_path / "texts"
    folder.mkdir()
    for name, text in TEXTS.items():
        (folder / name).write_text(text * 3)
    return folder


def config(tmp_path, tiny_bert_dir, text_folder, **kw) -> TrainConfig:
    base = dict(
        output=str(tmp_path / "out"),
        base_model=str(tiny_bert_dir),
        texts=[str(text_folder)],
        granularities=[8, 16],
        steps=6,
        batch_size=4,
        lr=5e-3,
        window_min_tokens=24,
        window_max_tokens=48,
        checkpoint_every=2,
        show_progress=False,
        seed=0,
    )
    return TrainConfig(**{**base, **kw})


def test_training_reduces_the_loss(tmp_path, tiny_bert_dir, text_folder):
    trainer = Trainer(config(tmp_path, tiny_bert_dir, text_folder, steps=25, ict_keep_prob=1.0))
    trainer.pairs = trainer.pairs[:4]  # one fixed batch: the loss must fall on it
    trainer.train()
    losses = [h["loss"] for h in trainer.history]
    assert np.mean(losses[-3:]) < 0.8 * np.mean(losses[:3])


def test_query_landmarks_are_distilled_when_asked(tmp_path, tiny_bert_dir, text_folder):
    on = Trainer(config(tmp_path, tiny_bert_dir, text_folder, distill_only_steps=5, distill_queries=True))
    parts = on.losses(on.pairs[:4], step=0)
    assert set(parts) == {"distill", "distill_q"} and all(torch.isfinite(v) and v > 0 for v in parts.values())
    off = Trainer(config(tmp_path, tiny_bert_dir, text_folder))
    assert set(off.losses(off.pairs[:4], step=0)) == {"distill", "contrastive", "maxsim"}


def test_score_distillation_is_the_kl_to_the_base_models_chunk_scores(tmp_path, tiny_bert_dir, text_folder):
    import torch.nn.functional as F

    trainer = Trainer(config(tmp_path, tiny_bert_dir, text_folder, score_distill_weight=2.0, distill_only_steps=2))
    pairs = trainer.pairs[:4]
    assert "score_distill" not in trainer.losses(pairs, step=0)  # distillation-only steps have no queries
    parts = trainer.losses(pairs, step=3)
    assert set(parts) == {"distill", "contrastive", "maxsim", "score_distill"}
    assert torch.isfinite(parts["score_distill"]) and parts["score_distill"] >= 0
    # The teacher's own scores given as the student's: zero; reversed scores: clearly positive.
    docs = [p.positive for p in pairs]
    trainer.enc._rng = np.random.default_rng(0)
    with torch.no_grad():
        _, states, text_of_chunk, layout = landmark_forward(trainer.student, trainer.enc, docs)
    teacher_chunks = trainer._teacher_chunks(docs, text_of_chunk, layout, states.device)
    tq = torch.as_tensor(trainer.teacher.encode([p.query for p in pairs]))
    from lmk_rag.train.losses import maxsim_scores

    teacher_logits = (
        maxsim_scores(F.normalize(tq, dim=-1), F.normalize(teacher_chunks, dim=-1), text_of_chunk, len(docs))
        / trainer.config.temperature
    )
    same = trainer._score_distill([p.query for p in pairs], teacher_logits, teacher_chunks, text_of_chunk, len(docs))
    assert float(same) == pytest.approx(0.0, abs=1e-5)
    other = trainer._score_distill([p.query for p in pairs], -teacher_logits, teacher_chunks, text_of_chunk, len(docs))
    assert float(other) > 0.01
    with pytest.raises(ValueError, match="score_distill_weight"):
        config(tmp_path, tiny_bert_dir, text_folder, score_distill_weight=-1.0)


def test_max_seconds_stops_early_and_saves_a_loadable_folder(tmp_path, tiny_bert_dir, text_folder):
    trainer = Trainer(config(tmp_path, tiny_bert_dir, text_folder, steps=50, max_seconds=1e-9))
    out = trainer.train()
    assert trainer.step == 1 and trainer.history[-1]["step"] == 1
    record = json.loads((out / "lmk_config.json").read_text())["training"]
    assert record["final"]["step"] == 1 and record["config"]["max_seconds"] == 1e-9
    assert LMKEncoder(model=str(out)).encode(["a short text"]).shape[0] == 1
    with pytest.raises(ValueError, match="max_seconds"):
        config(tmp_path, tiny_bert_dir, text_folder, max_seconds=0)
    # the step reached replays exactly with stop_at_step (same schedule, same batches)
    replay = Trainer(config(tmp_path, tiny_bert_dir, text_folder, output=str(tmp_path / "r"), steps=50, stop_at_step=1))
    replay.train()
    assert replay.step == 1 and replay.history == trainer.history
    with pytest.raises(ValueError, match="stop_at_step"):
        config(tmp_path, tiny_bert_dir, text_folder, steps=5, stop_at_step=6)


def test_init_from_continues_from_a_trained_folder(tmp_path, tiny_bert_dir, text_folder):
    first = Trainer(config(tmp_path, tiny_bert_dir, text_folder, steps=3)).train()
    texts = ["Spring tides come at new and full moon.", "Bulk fermentation takes four to six hours."]
    trained = LMKEncoder(model=str(first), granularity=8).encode(texts)
    cont = Trainer(config(tmp_path, tiny_bert_dir, text_folder, output=str(tmp_path / "next"), init_from=str(first)))
    cont.enc._rng = np.random.default_rng(0)
    with torch.no_grad():  # before any step the student is the folder's model
        pooled, *_ = landmark_forward(cont.student, LMKEncoder(str(tiny_bert_dir), granularity=8), texts)
    np.testing.assert_allclose(torch.nn.functional.normalize(pooled, dim=-1).numpy(), trained, atol=1e-5)
    base = Trainer(config(tmp_path, tiny_bert_dir, text_folder, output=str(tmp_path / "fresh")))
    with torch.no_grad():
        fresh, *_ = landmark_forward(base.student, LMKEncoder(str(tiny_bert_dir), granularity=8), texts)
    assert not np.allclose(torch.nn.functional.normalize(fresh, dim=-1).numpy(), trained, atol=1e-3)
    with pytest.raises(ValueError, match="init_from"):
        Trainer(config(tmp_path, tiny_bert_dir, text_folder, init_from=str(tmp_path)))
    with pytest.raises(ValueError, match="init_from"):
        config(tmp_path, tiny_bert_dir, text_folder, init_from=str(first), full_finetune=True)


def test_landmark_weights_train_and_travel_with_the_folder(tmp_path, tiny_bert_dir, text_folder):
    trainer = Trainer(config(tmp_path, tiny_bert_dir, text_folder, steps=1, landmark_weights="tokens"))
    assert trainer.enc.landmark_weights == trainer.query_enc.landmark_weights == "tokens"
    texts = [" ".join(["tide"] * 20), "Spring tides come at new and full moon."]  # 20 tokens at k=8: 8 + 8 + 4
    with torch.no_grad():
        pooled, states, text_of_chunk, layout = landmark_forward(trainer.student, trainer.enc, texts)
    first = text_of_chunk == 0
    assert layout.chunk_sizes[first.numpy()].tolist()[-1] == 4  # k of 8 or 16: a short last chunk
    sizes = torch.as_tensor(np.maximum(layout.chunk_sizes, 1), dtype=torch.float32)
    expected = (states[first] * sizes[first, None]).sum(0) / sizes[first].sum()
    torch.testing.assert_close(pooled[0], expected, atol=1e-5, rtol=1e-5)
    out = trainer.train()
    assert LMKEncoder(model=str(out)).landmark_weights == "tokens"
    # Continuing from it keeps its weighting unless told otherwise.
    cont = Trainer(config(tmp_path, tiny_bert_dir, text_folder, output=str(tmp_path / "next"), init_from=str(out)))
    assert cont.landmark_weights == "tokens"
    assert Trainer(config(tmp_path, tiny_bert_dir, text_folder, steps=1)).landmark_weights == "equal"
    with pytest.raises(ValueError, match="landmark_weights must be one of"):
        config(tmp_path, tiny_bert_dir, text_folder, landmark_weights="chunks")


def test_init_from_a_merged_folder_needs_its_rank_and_alpha(tmp_path, tiny_bert_dir, text_folder):
    from lmk_rag.train.merge import merge_lmk_folders

    first = Trainer(config(tmp_path, tiny_bert_dir, text_folder, steps=2)).train()
    merged = merge_lmk_folders([first, first], [0.5, 0.5], tmp_path / "merged")  # rank 16 + 16, alpha = rank
    for r, alpha in ((16, 32), (32, 16)):  # a rank that differs, an alpha that would rescale silently
        with pytest.raises(ValueError, match=r"rank 32 with lora_alpha 32.*--lora-r 32 --lora-alpha 32"):
            Trainer(config(tmp_path, tiny_bert_dir, text_folder, init_from=str(merged), lora_r=r, lora_alpha=alpha))
    with pytest.raises(ValueError, match="lora_alpha must be an int >= 1"):
        config(tmp_path, tiny_bert_dir, text_folder, lora_alpha=0)
    texts = ["Spring tides come at new and full moon.", "Bulk fermentation takes four to six hours."]
    cont = Trainer(
        config(tmp_path, tiny_bert_dir, text_folder, output=str(tmp_path / "next"), init_from=str(merged), lora_r=32)
    )
    cont.enc._rng = np.random.default_rng(0)
    with torch.no_grad():  # the merge of a folder with itself is that folder: continuing starts from it
        pooled, *_ = landmark_forward(cont.student, LMKEncoder(str(tiny_bert_dir), granularity=8), texts)
    trained = LMKEncoder(model=str(first), granularity=8).encode(texts)
    np.testing.assert_allclose(torch.nn.functional.normalize(pooled, dim=-1).numpy(), trained, atol=1e-5)


def test_inverse_cloze_pairs_are_the_same_with_sentence_splitting_in_processes():
    from lmk_rag.train.data import inverse_cloze_pairs

    windows = [
        f"Window {i} starts here. It has a second sentence about item {i}. And a third one ends it."
        for i in range(1200)
    ]
    assert inverse_cloze_pairs(windows, 0.5, seed=3, workers=2) == inverse_cloze_pairs(windows, 0.5, seed=3)


def test_inverse_cloze_pairs_locate_the_sentence_they_kept():
    from lmk_rag.train.data import inverse_cloze_pairs

    windows = [
        f"Window {i} starts here. It has a second sentence about item {i}. And a third one ends it." for i in range(40)
    ]
    pairs = inverse_cloze_pairs(windows, 0.5, seed=3)
    kept = [p for p in pairs if p.answer is not None]
    assert kept and len(kept) < len(pairs)  # about half keep their sentence
    for pair in kept:
        a, b = pair.answer
        assert " ".join(pair.positive[a:b].split()) == pair.query
    assert all(p.query not in p.positive for p in pairs if p.answer is None)


def test_answer_landmarks_are_the_chunks_covering_the_answer():
    from lmk_rag.train.losses import answer_landmarks

    spans = np.array([[0, 10], [10, 20], [20, 30], [0, 10], [10, 20], [0, 50]])
    text_of_chunk = np.array([0, 0, 0, 1, 1, 2])  # text 2 is past the answers (a hard negative)
    mask = answer_landmarks(spans, text_of_chunk, [(12, 26), None])
    # [10, 20) overlaps 8 of the 10 it shares; [20, 30) overlaps 6 of the shorter 10: both cover
    assert mask.tolist() == [False, True, True, False, False, False]
    assert answer_landmarks(spans, text_of_chunk, [(8, 11), (0, 100)]).tolist() == [
        True,
        False,
        False,
        True,
        True,
        False,
    ]


def test_landmark_loss_is_multi_positive_infonce_within_each_querys_landmarks():
    from lmk_rag.train.losses import landmark_loss

    gen = torch.Generator().manual_seed(0)
    q = torch.nn.functional.normalize(torch.randn(3, 8, generator=gen), dim=-1)
    states = torch.nn.functional.normalize(torch.randn(9, 8, generator=gen), dim=-1)
    owner = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, -1])
    positive = torch.tensor([True, False, True, False, True, True, True, False, True])
    loss = landmark_loss(q, states, owner, positive, temperature=0.1)
    # by hand: query 1 has no negative landmark and is left out; landmark 8 belongs to nobody
    expected = []
    for i, (mine, hits) in enumerate([([0, 1, 2, 3], [0, 2]), ([6, 7], [6])]):
        query = [0, 2][i]
        sims = states @ q[query] / 0.1
        expected.append(torch.logsumexp(sims[mine], 0) - torch.logsumexp(sims[hits], 0))
    assert float(loss) == pytest.approx(float(torch.stack(expected).mean()), rel=1e-5)
    # query 2's answer landmark (6) turned towards it lowers the loss; its other landmark (7) raises it
    toward, away = states.clone(), states.clone()
    toward[6], away[7] = q[2], q[2]
    before = float(landmark_loss(q, states, owner, positive, 0.1))
    assert (
        float(landmark_loss(q, toward, owner, positive, 0.1))
        < before
        < float(landmark_loss(q, away, owner, positive, 0.1))
    )
    assert landmark_loss(q, states, torch.full((9,), -1), positive, 0.1) is None
    assert landmark_loss(q, states, owner, torch.zeros(9, dtype=torch.bool), 0.1) is None


def test_the_landmark_term_trains_on_pairs_with_answers_only(tmp_path, tiny_bert_dir, text_folder):
    trainer = Trainer(config(tmp_path, tiny_bert_dir, text_folder, landmark_weight=0.5, ict_keep_prob=1.0))
    pairs = trainer.pairs[:4]
    assert all(p.answer is not None for p in pairs)
    parts = trainer.losses(pairs, step=0)
    assert set(parts) == {"distill", "contrastive", "maxsim", "landmark"}
    assert torch.isfinite(parts["landmark"]) and parts["landmark"] > 0
    parts["landmark"].backward()
    assert float(trainer.student.delta.grad.abs().sum()) > 0  # it reaches the landmark offset
    unlocated = [Pair(p.query, p.positive) for p in pairs]
    assert "landmark" not in trainer.losses(unlocated, step=0)
    with pytest.raises(ValueError, match="landmark_weight"):
        config(tmp_path, tiny_bert_dir, text_folder, landmark_weight=-1.0)


def test_bf16_autocast_gives_the_same_losses_within_bf16_precision(tmp_path, tiny_bert_dir, text_folder):
    fp32 = Trainer(config(tmp_path, tiny_bert_dir, text_folder))
    bf16 = Trainer(config(tmp_path, tiny_bert_dir, text_folder, bf16=True))
    a, b = fp32.losses(fp32.pairs[:4], step=0), bf16.losses(bf16.pairs[:4], step=0)
    assert set(a) == set(b)
    for name in a:
        assert torch.isfinite(b[name]) and b[name].dtype == torch.float32
        assert abs(a[name].item() - b[name].item()) < 0.05 * max(1.0, abs(a[name].item())), name
    b["maxsim"].backward()
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in bf16.student.trainable())


def test_saved_folder_reloads_with_its_settings_and_identical_vectors(tmp_path, tiny_bert_dir, text_folder):
    trainer = Trainer(config(tmp_path, tiny_bert_dir, text_folder))
    out = trainer.train()
    cfg = json.loads((out / "lmk_config.json").read_text())
    assert (
        cfg["granularity"] == 8
        and cfg["pooling"] == "lmk"
        and (out / "adapter" / "adapter_model.safetensors").is_file()
    )
    a = LMKEncoder(out, device="cpu", normalize=False)
    assert a.granularity == 8 and a.adapter_name == out.name
    texts = [TEXTS["tides.txt"], "short query"]
    # The merged, reloaded model reproduces the trained student's own landmark states.
    trainer.student.eval()
    trainer.enc.granularity = 8
    with torch.no_grad():
        pooled, _, _, _ = landmark_forward(trainer.student, trainer.enc, texts)
    np.testing.assert_allclose(a.encode(texts), pooled.numpy(), atol=1e-4)
    base = LMKEncoder(tiny_bert_dir, granularity=8, device="cpu", normalize=False)
    assert not np.allclose(a.encode(texts), base.encode(texts), atol=1e-3)
    adapter = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == str(tiny_bert_dir)  # the name the run was given


def test_resume_continues_exactly(tmp_path, tiny_bert_dir, text_folder):
    full = Trainer(config(tmp_path / "a", tiny_bert_dir, text_folder, steps=4))
    full.train()
    interrupted = Trainer(config(tmp_path / "b", tiny_bert_dir, text_folder, steps=2))
    interrupted.train()  # stands for a run killed after its step-2 checkpoint
    resumed = Trainer(config(tmp_path / "b", tiny_bert_dir, text_folder, steps=4))
    assert resumed.maybe_resume() and resumed.step == 2
    resumed.train()
    assert [h["loss"] for h in resumed.history] == pytest.approx([h["loss"] for h in full.history], rel=1e-4)
    torch.testing.assert_close(resumed.student.delta, full.student.delta, atol=1e-6, rtol=1e-4)


def test_jsonl_pairs_and_bad_config(tmp_path, tiny_bert_dir):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"query": "q1", "positive": "p1", "negative": "n1"}\n{"anchor": "q2", "pos": ["p2"]}\n')
    pairs = load_pairs(path)
    assert [(p.query, p.positive, p.negative) for p in pairs] == [("q1", "p1", "n1"), ("q2", "p2", None)]
    path.write_text('{"query": "q", "positive": "the answer is here", "answer": [4, 10]}\n')
    assert load_pairs(path)[0].answer == (4, 10)
    for bad in ("[4]", "[10, 4]", "[0, 99]", '"4-10"', "[true, 3]"):
        (tmp_path / "bad.jsonl").write_text(f'{{"query": "q", "positive": "the answer is here", "answer": {bad}}}\n')
        with pytest.raises(ValueError, match="answer"):
            load_pairs(tmp_path / "bad.jsonl")
    # save_pairs writes what load_pairs reads back, field for field (non-ASCII and newlines included).
    built = [Pair("q1", "p1\nwith ünïcode", "n1", (0, 2)), Pair("q2", "p2"), Pair("q3", "p3", None, (1, 2))]
    assert save_pairs(built, tmp_path / "saved.jsonl") == 3
    assert load_pairs(tmp_path / "saved.jsonl") == built
    path.write_text('{"query": "q1", "positive": "p1", "negative": "n1"}\n{"anchor": "q2", "pos": ["p2"]}\n')
    (tmp_path / "bad.jsonl").write_text('{"question": "x"}\n')
    with pytest.raises(ValueError, match="query"):
        load_pairs(tmp_path / "bad.jsonl")
    with pytest.raises(ValueError, match="training data"):
        TrainConfig(output=str(tmp_path / "o"))
    with pytest.raises(ValueError, match="batch_size"):
        TrainConfig(output=str(tmp_path / "o"), pairs=str(path), batch_size=1)
    cfg = TrainConfig(
        output=str(tmp_path / "o"),
        base_model=str(tiny_bert_dir),
        pairs=str(path),
        batch_size=2,
        steps=2,
        granularities=[8],
        show_progress=False,
    )
    out = Trainer(cfg).train()  # pairs with a hard negative train too
    assert (out / "lmk_config.json").is_file()


def test_shipped_adapter_is_the_default_and_differs_from_the_base():
    from lmk_rag.folders.models import DEFAULT_MODEL, SHIPPED_ADAPTER, SHIPPED_ADAPTER_NAME

    assert (SHIPPED_ADAPTER / "lmk_config.json").is_file()
    assert sum(f.stat().st_size for f in SHIPPED_ADAPTER.rglob("*") if f.is_file()) < 8 * 2**20  # a few MB
    for folder in SHIPPED_ADAPTER.parent.iterdir():  # no path of the machine that trained them
        adapter = json.loads((folder / "adapter" / "adapter_config.json").read_text())
        assert adapter["base_model_name_or_path"] == DEFAULT_MODEL, folder
    default = LMKEncoder(device="cpu")
    base = LMKEncoder(DEFAULT_MODEL, device="cpu")
    assert default.model_name == SHIPPED_ADAPTER_NAME and default.adapter_name == SHIPPED_ADAPTER.name
    assert default.fingerprint.adapter == SHIPPED_ADAPTER.name and base.fingerprint.adapter is None
    assert default.model is not base.model
    texts = ["The passkey for Alice's locker is 12345.", "Tides follow the moon."]
    a, b = default.encode(texts), base.encode(texts)
    assert np.isfinite(a).all() and not np.allclose(a, b, atol=1e-3)
    # the fingerprint's model name opens the same adapter again (indexes rely on it)
    assert LMKEncoder(SHIPPED_ADAPTER_NAME, device="cpu").model is default.model


def test_learning_rate_schedule_and_window_settings(tmp_path, tiny_bert_dir, text_folder):
    trainer = Trainer(config(tmp_path, tiny_bert_dir, text_folder, steps=10, lr=1.0, warmup_steps=2, lr_decay="linear"))
    assert [round(trainer.lr_at(s), 3) for s in range(10)] == [
        0.5,
        1.0,
        1.0,
        0.875,
        0.75,
        0.625,
        0.5,
        0.375,
        0.25,
        0.125,
    ]
    constant = Trainer(config(tmp_path, tiny_bert_dir, text_folder, lr=0.1))
    assert {constant.lr_at(s) for s in range(6)} == {0.1}
    trainer.train()
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(0.125)  # the last step's rate was used
    with pytest.raises(ValueError, match="lr_decay"):
        config(tmp_path, tiny_bert_dir, text_folder, lr_decay="cosine")
    with pytest.raises(ValueError, match="distill_weight"):
        config(tmp_path, tiny_bert_dir, text_folder, distill_only_steps=3, distill_weight=0.0)
    with pytest.raises(ValueError, match="window_min_tokens"):
        config(tmp_path, tiny_bert_dir, text_folder, window_min_tokens=500, window_max_tokens=100)
    with pytest.raises(ValueError, match="distill_batch_size"):
        config(tmp_path, tiny_bert_dir, text_folder, distill_batch_size=0)


def test_distillation_steps_use_their_own_batch_size(tmp_path, tiny_bert_dir, text_folder, monkeypatch):
    trainer = Trainer(
        config(tmp_path, tiny_bert_dir, text_folder, steps=4, distill_only_steps=2, distill_batch_size=2, batch_size=4)
    )
    assert [trainer.batch_size_at(s) for s in range(4)] == [2, 2, 4, 4]
    seen = []
    real = trainer.losses
    monkeypatch.setattr(trainer, "losses", lambda pairs, step: seen.append(len(pairs)) or real(pairs, step))
    trainer.train()
    assert seen == [2, 2, 4, 4]


def test_training_on_documentation_sections(tmp_path, tiny_bert_dir):
    """--sections: heading -> passage pairs with same-page hard negatives, from the train half only."""
    from lmk_rag.corpora.texts import split_of

    root = tmp_path / "docs"
    root.mkdir()
    body = " ".join(TEXTS.values())
    for i in range(10):
        sections = "".join(
            f"Part {i} section {j} heading\n{'-' * 30}\n\nPart {j} of page {i}. {body}\n\n" for j in range(4)
        )
        (root / f"page{i}.rst").write_text(f"Page {i}\n{'=' * 10}\n\n{sections}")
    cfg = TrainConfig(
        output=str(tmp_path / "out"),
        base_model=str(tiny_bert_dir),
        sections=[str(root)],
        granularities=[8, 16],
        steps=2,
        batch_size=4,
        window_min_tokens=24,
        window_max_tokens=48,
        show_progress=False,
    )
    trainer = Trainer(cfg)
    train_pages = {f"page{i}" for i in range(10) if split_of(f"pydocs/page{i}") == "train"}
    headed = [p for p in trainer.pairs if "heading" in p.query]
    assert headed and {p.query.split()[1] for p in headed} == {n[4:] for n in train_pages}
    assert all(p.negative and p.negative != p.positive for p in headed)
    for pair in headed:  # the answer span is the body of the heading's section, inside the positive
        assert pair.answer is not None
        a, b = pair.answer
        _, page, _, section, _ = pair.query.split()
        assert pair.positive[a:b].lstrip().startswith(f"Part {section} of page {page}.")
        assert f"Part {int(section) + 1} of page" not in pair.positive[a:b]  # it ends where the section ends
    trainer.train()
    assert (tmp_path / "out" / "lmk_config.json").is_file()


def test_train_command_line(tmp_path, tiny_bert_dir, text_folder, capsys):
    from lmk_rag.cli import main

    out = tmp_path / "cli-out"
    args = [
        "train",
        "--output",
        str(out),
        "--base-model",
        str(tiny_bert_dir),
        "--texts",
        str(text_folder),
        "--granularities",
        "8,16",
        "--steps",
        "2",
        "--batch-size",
        "4",
        "--warmup-steps",
        "1",
        "--lr-decay",
        "linear",
        "--distill-only-steps",
        "1",
        "--distill-queries",
        "--landmark-weight",
        "0.5",
        "--bf16",
        "--window-min-tokens",
        "24",
        "--window-max-tokens",
        "48",
        "--lora-r",
        "8",
        "--lora-alpha",
        "16",
        "--no-progress",
    ]
    assert main(args) == 0
    recorded = json.loads((out / "lmk_config.json").read_text())["training"]["config"]
    assert (recorded["warmup_steps"], recorded["lr_decay"], recorded["distill_queries"]) == (1, "linear", True)
    assert (recorded["window_min_tokens"], recorded["window_max_tokens"], recorded["bf16"]) == (24, 48, True)
    assert recorded["landmark_weight"] == 0.5
    assert (recorded["lora_r"], recorded["lora_alpha"]) == (8, 16)
    assert json.loads((out / "adapter" / "adapter_config.json").read_text())["lora_alpha"] == 16
    assert "LMKEncoder(model=" in capsys.readouterr().out
    bad = args[:-5] + ["--window-min-tokens", "500", "--window-max-tokens", "100", "--no-progress"]
    assert main(bad) == 2 and "window_min_tokens" in capsys.readouterr().err


def test_a_crafted_checkpoint_runs_no_code(tmp_path, tiny_bert_dir, text_folder):
    """Resume reads state.pt with weights_only=True: a pickle that would run code is refused."""
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (exec, (f"open({str(marker)!r}, 'w').write('x')",))

    cfg = config(tmp_path, tiny_bert_dir, text_folder)
    folder = tmp_path / "out" / "checkpoint"
    folder.mkdir(parents=True)
    torch.save({"step": 1, "params": {}, "optimizer": {}, "history": [], "x": Payload()}, folder / "state.pt")
    with pytest.raises(ValueError, match="cannot resume"):
        Trainer(cfg).maybe_resume()
    assert not marker.exists()


def test_checkpoint_swap_keeps_a_whole_checkpoint(tmp_path, tiny_bert_dir, text_folder):
    """A crash while writing leaves the previous whole checkpoint, which resume uses (it used to
    remove the old one first, so a crash then restarted training from step 0)."""
    cfg = config(tmp_path, tiny_bert_dir, text_folder, steps=2)
    Trainer(cfg).train()
    folder = tmp_path / "out" / "checkpoint"
    assert sorted(p.name for p in folder.iterdir()) == ["state.pt"]
    (folder / "state.pt.tmp").write_bytes(b"half a checkpoint, as a crash mid-write leaves it")
    again = Trainer(cfg)
    assert again.maybe_resume() and again.step == 2


def test_full_finetune_folder_loads_with_its_landmark_offset(tmp_path, tiny_bert_dir, text_folder):
    """A --full-finetune folder ("base_model": ".") must get its trained landmark offset too."""
    trainer = Trainer(config(tmp_path, tiny_bert_dir, text_folder, full_finetune=True, steps=3, lr=5e-2))
    out = trainer.train()
    assert json.loads((out / "lmk_config.json").read_text())["base_model"] == "."
    assert trainer.student.delta.abs().sum() > 0
    loaded = LMKEncoder(out, device="cpu", normalize=False)
    texts = [TEXTS["bike.txt"], "short query"]
    trainer.student.eval()
    trainer.enc.granularity = 8
    with torch.no_grad():
        pooled, _, _, _ = landmark_forward(trainer.student, trainer.enc, texts)
    np.testing.assert_allclose(loaded.encode(texts), pooled.numpy(), atol=1e-4)


def test_training_reads_train_domains_only(tmp_path, tiny_bert_dir):
    """Other projects' docs (a fake `dpkg -x` of bash-doc, a train domain) give heading -> passage
    pairs; a dev or test domain is refused, so those results stay out-of-domain."""
    folder = tmp_path / "docs" / "bash-doc" / "usr/share/doc/bash"
    folder.mkdir(parents=True)
    body = " ".join(f"the shell expands word{i} before running it." for i in range(120))
    sections = "".join(f"<h2>How the shell expands {w} words</h2><p>{body}</p>" for w in ("quoted", "braced", "tilde"))
    (folder / "bashref.html").write_text(f"<h1>Bash reference</h1><p>{body}</p>{sections}")
    cfg = config(
        tmp_path,
        tiny_bert_dir,
        None,
        texts=[],
        domains=["bash"],
        docs_root=str(tmp_path / "docs"),
        granularities=[8],
        batch_size=2,
        steps=1,
    )
    trainer = Trainer(cfg)
    queries = {p.query for p in trainer.pairs}
    assert {"How the shell expands quoted words", "How the shell expands tilde words"} <= queries
    for held_out in ("git", "dev", "test", "nodejs"):
        with pytest.raises(ValueError, match="dev/test domains"):
            TrainConfig(output=str(tmp_path / "o"), domains=[held_out])


def test_train_options_are_generated_from_the_config():
    """Every TrainConfig field is a `lmk-rag train` option with the field's default, help and
    choices: a default or description is written once, in the config."""
    import argparse
    import dataclasses

    from lmk_rag.cli import build_parser
    from lmk_rag.train.config import LR_DECAYS

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    options = {a.dest: a for a in sub.choices["train"]._actions}
    for f in dataclasses.fields(TrainConfig):
        action = options[f.name]
        assert f.metadata["help"] in action.help, f.name
        if f.name == "output":
            assert action.required
            continue
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        assert action.default == default, f.name
    assert options["lr_decay"].choices == LR_DECAYS
    assert options["show_progress"].option_strings == ["--no-progress"]
    args = parser.parse_args(["train", "--output", "o", "--texts", "a", "--texts", "b", "--granularities", "16,32"])
    assert args.texts == ["a", "b"] and args.granularities == [16, 32] and args.show_progress is True
    assert build_parser().parse_args(["train", "--output", "o"]).texts == []  # no list shared between runs
