"""Tasks: bracket generator and labels against a plain stack, accuracies, char dataset, corpus lookup and download.

No test touches the network: downloads use a fake opener or a ``file://`` URL, the cache is a temporary directory.
"""

from __future__ import annotations

import hashlib
import io
import logging

import numpy as np
import pytest
import torch

from hybrid_attention.tasks import brackets as br
from hybrid_attention.tasks import shakespeare as sh


# ---------------------------------------------------------------------- brackets
@pytest.mark.parametrize("T", [2, 4, 10, 16, 24])
def test_brackets_are_well_nested_with_stack_labels(T):
    x, y = br.generate_brackets(300, T, seed=T)
    assert x.shape == y.shape == (300, T) and x.dtype == y.dtype == torch.int64
    for tok, lab in zip(x, y):
        s = br.decode(tok)
        assert lab.tolist() == br.match_positions(s)  # raises on unbalanced strings
        closing = tok == br.CLOSE
        assert (lab[closing] < torch.arange(T)[closing]).all()


def test_brackets_seeded_and_varied_depth():
    a = br.generate_brackets(50, 16, seed=1)
    b = br.generate_brackets(50, 16, seed=1)
    c = br.generate_brackets(50, 16, seed=2)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and not torch.equal(a[0], c[0])
    x, _ = br.generate_brackets(2000, 16, seed=0)
    depth = torch.cumsum(1 - 2 * x, dim=1).amax(1)
    counts = torch.bincount(depth, minlength=9)
    assert counts[1] > 20 and counts[2] > 100 and counts[3:].sum() > 300 and counts[6:].sum() > 10  # shallow to deep
    assert len({br.decode(t) for t in x}) > 500  # many distinct strings (C_8 = 1430 exist)


@pytest.mark.parametrize("T, exc", [(5, ValueError), (0, ValueError), (4.0, TypeError)])
def test_brackets_bad_length(T, exc):
    with pytest.raises(exc, match="even length|must be an int"):
        br.generate_brackets(3, T, seed=0)


def test_match_positions_rejects_bad_strings():
    for s in ("(()", "())(", "(a)"):
        with pytest.raises(ValueError):
            br.match_positions(s)


def test_accuracy_by_hand():
    labels = torch.tensor([[-100, 0, -100, 2], [-100, -100, 1, 0]])
    pred = torch.tensor([[0, 0, 0, 2], [0, 0, 1, 1]])  # first string right, second: one of two right
    logits = torch.nn.functional.one_hot(pred, 4).float()
    per, whole = br.accuracy(logits, labels)
    assert per == pytest.approx(3 / 4) and whole == pytest.approx(1 / 2)


def test_bracket_task_heldout_independent_of_training_seed():
    t1, t2 = br.BracketTask(8, val_size=100), br.BracketTask(8, val_size=100)
    assert torch.equal(t1.val[0], t2.val[0])  # the same held-out set for every run
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    a, b = t1.get_batch("train", 16, generator=g1), t2.get_batch("train", 16, generator=g2)
    assert torch.equal(a[0], b[0])
    heldout = br.generate_brackets(100, 8, np.random.default_rng(br.VAL_SEED))
    assert torch.equal(heldout[0], t1.val[0])
    with pytest.raises(ValueError, match="block_size 8"):
        t1.get_batch("train", 4, 10)
    with pytest.raises(ValueError, match="split"):
        t1.get_batch("test", 4)


# ---------------------------------------------------------------------- characters
def test_char_dataset():
    text = "abcabcxyz\n" * 50
    ds = sh.CharDataset(text)
    assert ds.chars == sorted(set(text)) and ds.vocab_size == 7
    assert ds.decode(ds.encode("zyx\n")) == "zyx\n"
    assert len(ds.splits["train"]) == int(0.9 * len(text)) and len(ds.splits["train"]) + len(ds.splits["val"]) == len(
        text
    )
    x, y = ds.get_batch("train", 5, 6, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (5, 6)
    assert torch.equal(x[:, 1:], y[:, :-1])
    with pytest.raises(ValueError, match="too few"):
        ds.get_batch("val", 2, 100)
    big = sh.CharDataset(text * 30)  # the vectorised encoder (>= 10k characters) agrees with the plain one
    assert torch.equal(big.splits["train"][: len(text)], torch.tensor(ds.encode(text)))


def test_real_corpus(shakespeare_path):
    ds = sh.load_shakespeare(shakespeare_path)
    assert ds.vocab_size == 65
    assert len(ds.splits["train"]) + len(ds.splits["val"]) == 1_115_394
    assert ds.decode(ds.splits["train"][:14]) == "First Citizen:"


# ---------------------------------------------------------------------- corpus lookup and download
class FakeResponse(io.BytesIO):
    pass


def fake_opener(payload: bytes, calls: list):
    def opener(url, timeout=None):
        calls.append(url)
        return FakeResponse(payload)

    return opener


@pytest.fixture
def no_env(monkeypatch, tmp_path):
    monkeypatch.delenv(sh.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path


def test_explicit_and_env_paths(no_env, monkeypatch, caplog):
    f = no_env / "corpus.txt"
    f.write_text("some other corpus\n")
    with caplog.at_level(logging.WARNING):
        assert sh.resolve_data_path(f) == f
    assert "different corpus" in caplog.text
    monkeypatch.setenv(sh.ENV_VAR, str(f))
    assert sh.resolve_data_path() == f
    with pytest.raises(FileNotFoundError) as info:
        sh.resolve_data_path(no_env / "missing.txt")
    assert "--data" in str(info.value) and sh.ENV_VAR in str(info.value) and sh.URL in str(info.value)
    monkeypatch.setenv(sh.ENV_VAR, str(no_env / "nope.txt"))
    with pytest.raises(FileNotFoundError, match=sh.ENV_VAR):
        sh.resolve_data_path()
    (no_env / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="empty"):
        sh.resolve_data_path(no_env / "empty.txt")


def test_download_into_cache_verifies_checksum(no_env, monkeypatch):
    payload = b"To be, or not to be\n" * 20
    monkeypatch.setattr(sh, "SHA256", hashlib.sha256(payload).hexdigest())
    calls: list = []
    cache = no_env / "cache"
    p = sh.resolve_data_path(cache_dir=cache, opener=fake_opener(payload, calls))
    assert p == cache / sh.FILENAME and p.read_bytes() == payload and calls == [sh.URL]
    assert sh.resolve_data_path(cache_dir=cache, opener=fake_opener(b"", calls)) == p and len(calls) == 1  # cached
    p.write_bytes(payload + b"tampered")
    with pytest.raises(ValueError, match="corrupt"):
        sh.resolve_data_path(cache_dir=cache, opener=fake_opener(payload, calls))


def test_download_failures_leave_nothing(no_env, monkeypatch):
    cache = no_env / "cache"
    with pytest.raises(ValueError, match="sha256"):
        sh.resolve_data_path(cache_dir=cache, opener=fake_opener(b"not shakespeare", []))
    assert not (cache / sh.FILENAME).exists() and not list(cache.glob(".download-*"))

    def offline(url, timeout=None):
        raise OSError("network is unreachable")

    with pytest.raises(FileNotFoundError, match="--data"):
        sh.resolve_data_path(cache_dir=cache, opener=offline)
    with pytest.raises(FileNotFoundError, match="downloading disabled"):
        sh.resolve_data_path(cache_dir=cache, allow_download=False)


def test_download_with_the_real_opener_from_a_file_url(no_env):
    src = no_env / "src.txt"
    src.write_bytes(b"O Romeo, Romeo\n" * 10)
    dest = sh.download(no_env / "out" / "c.txt", url=src.as_uri(), sha256=hashlib.sha256(src.read_bytes()).hexdigest())
    assert dest.read_bytes() == src.read_bytes()


def test_default_cache_dir(no_env):
    assert sh.default_cache_dir() == no_env / "xdg" / "hybrid-attention"


# ---------------------------------------------------------------------- issue #10: large vocabularies
@pytest.mark.parametrize("vocab", [200, 300, 40_000, 70_000])
def test_char_dataset_ids_do_not_overflow(vocab):
    """Vocabularies over 32,767 characters overflowed the int16 ids of the fast encoder (negative ids)."""
    chars = [chr(0x10000 + i) for i in range(vocab)]
    text = "".join(chars) * max(1, 20_000 // vocab + 1)
    ds = sh.CharDataset(text)
    assert ds.vocab_size == vocab
    data = torch.cat([ds.splits["train"], ds.splits["val"]])
    assert data.dtype == torch.int64 and int(data.min()) == 0 and int(data.max()) == vocab - 1
    assert data[:vocab].tolist() == list(range(vocab))
    assert ds.decode(data[-50:]) == text[-50:]


def test_index_dtype_is_the_smallest_safe_one():
    assert [np.dtype(sh._index_dtype(v)).name for v in (1, 256, 257, 32_768, 32_769, 2**31, 2**31 + 1)] == [
        "uint8",
        "uint8",
        "int16",
        "int16",
        "int32",
        "int32",
        "int64",
    ]
