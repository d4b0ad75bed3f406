"""Shared fixtures: the packaged model, and tiny randomly initialised models built from configs."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path

import pytest
import torch

SAMPLE_TEXT = (
    "Landmark pooling inserts a separator token after every chunk of tokens. "
    "The encoder then reads the whole document, and each landmark summarises its chunk in context. "
    "Mean pooling blurs local evidence; CLS pooling forgets the end of long documents. "
)


@pytest.fixture(scope="session")
def packaged_dir() -> Path:
    from lmk_rag.folders.models import packaged_model_path

    return packaged_model_path()


@pytest.fixture(scope="session")
def bert_tokenizer(packaged_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(packaged_dir)


@pytest.fixture(scope="session")
def encoder():
    from lmk_rag import LMKEncoder

    return LMKEncoder(device="cpu")


def _save(model, tokenizer, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory, bert_tokenizer) -> Path:
    """A 2-layer, 32-d BERT with the packaged WordPiece tokenizer (fast to run on 1 MB)."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(bert_tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    return _save(BertModel(config).eval(), bert_tokenizer, tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="session")
def tiny_modernbert_dir(tmp_path_factory, bert_tokenizer) -> Path:
    """A 2-layer rotary ModernBERT trained for 64 positions, built from a config."""
    from transformers import ModernBertConfig, ModernBertModel

    torch.manual_seed(0)
    config = ModernBertConfig(  # type: ignore[call-arg]  # older keyword, still accepted at run time
        vocab_size=len(bert_tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        global_attn_every_n_layers=1,
        local_attention=64,
        pad_token_id=bert_tokenizer.pad_token_id,
        bos_token_id=bert_tokenizer.cls_token_id,
        eos_token_id=bert_tokenizer.sep_token_id,
        cls_token_id=bert_tokenizer.cls_token_id,
        sep_token_id=bert_tokenizer.sep_token_id,
    )
    tok = bert_tokenizer.__class__.from_pretrained(bert_tokenizer.name_or_path)
    tok.model_max_length = 64
    return _save(ModernBertModel(config).eval(), tok, tmp_path_factory.mktemp("tiny_modernbert"))


@pytest.fixture(scope="session")
def bpe_tokenizer():
    """A byte-level BPE tokenizer trained here; pad, EOS and landmark are one id, no SEP/CLS."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["</s>"],
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([SAMPLE_TEXT] * 20, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="</s>")


@pytest.fixture(scope="session")
def tiny_bpe_dir(tmp_path_factory, bpe_tokenizer) -> Path:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(bpe_tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        pad_token_id=bpe_tokenizer.pad_token_id,
    )
    return _save(BertModel(config).eval(), bpe_tokenizer, tmp_path_factory.mktemp("tiny_bpe"))
