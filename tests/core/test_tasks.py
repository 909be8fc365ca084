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


# ---------------------------------------------------------------------- large vocabularies
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


# ---------------------------------------------------------------------- bracket variants
from hybrid_attention.tasks import bracket_variants as bv  # noqa: E402


def _brute_match(tokens, i, types):
    """Independent matcher: the opening bracket j < i of the same type such that tokens[j + 1 : i] is well nested
    (depth never negative, back to zero; fillers ignored); scanning every j, not a stack. None if there is none."""
    filler = 2 * types
    found = []
    for j in range(i):
        if tokens[j] == filler or tokens[j] % 2 or tokens[j] // 2 != tokens[i] // 2:
            continue
        ok, stack = True, []
        for t in tokens[j + 1 : i]:
            if t == filler:
                continue
            if t % 2 == 0:
                stack.append(t // 2)
            elif not stack or stack.pop() != t // 2:
                ok = False
                break
        if ok and not stack:
            found.append(j)
    return found[-1] if found else None


def _brute_depth(tokens, j, types):
    """Nesting depth of the pair opened at j: 1 + number of brackets opened before j and closed after it."""
    filler, d = 2 * types, 1
    for k in range(j):
        if tokens[k] != filler and tokens[k] % 2 == 0:
            closes = [
                i for i in range(k + 1, len(tokens)) if tokens[i] % 2 == 1 and _brute_match(tokens, i, types) == k
            ]
            if not closes or closes[0] > j:
                d += 1
    return d


@pytest.mark.parametrize(
    "T, variant",
    [
        (12, bv.BracketVariant()),
        (12, bv.BracketVariant(types=3)),
        (13, bv.BracketVariant(types=2, filler=0.3)),
        (10, bv.BracketVariant(types=2, filler=0.2, train_max_depth=2)),
    ],
)
def test_variant_labels_and_depths_match_a_brute_force_matcher(T, variant):
    x, y, d = bv.generate_variant(60, T, variant, max_depth=variant.train_max_depth, seed=T)
    assert x.shape == y.shape == d.shape == (60, T)
    assert int(x.max()) < variant.vocab_size()
    for tok, lab, dep in zip(x.tolist(), y.tolist(), d.tolist()):
        ref_lab, ref_dep = bv.reference_labels(tok, variant.types)  # also raises on a mismatched string
        assert lab == ref_lab and dep == ref_dep
        for i, t in enumerate(tok):
            if t != 2 * variant.types and t % 2:
                assert lab[i] == _brute_match(tok, i, variant.types)
                assert dep[i] == _brute_depth(tok, lab[i], variant.types)
        if variant.train_max_depth:
            assert max(dep) <= variant.train_max_depth


def test_variant_windows_score_exactly_the_matches_inside_the_window():
    v = bv.BracketVariant(types=2, filler=0.1, source_length=40)
    x, y, d = bv.generate_variant(80, 12, v, seed=3)
    unscored_closes = 0
    for tok, lab, dep in zip(x.tolist(), y.tolist(), d.tolist()):
        for i, t in enumerate(tok):
            if t == 2 * v.types or t % 2 == 0:
                assert lab[i] == br.IGNORE and dep[i] == 0
                continue
            m = _brute_match(tok, i, v.types)
            # a match inside the window is the label; none inside means the opening bracket precedes the window
            assert lab[i] == (m if m is not None else br.IGNORE)
            unscored_closes += m is None
            assert (dep[i] >= 1) == (m is not None)
    assert unscored_closes > 0  # windows really cut pairs


def test_variant_disjoint_split_and_depth_split():
    task = bv.BracketVariantTask(12, types=2, filler=0.2, disjoint=True, train_max_depth=2, val_size=400)
    val = {tuple(r) for r in task.val[0].tolist()}
    assert bool(bv.in_heldout_partition(task.val[0]).all())
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        x, y = task.get_batch("train", 64, generator=g)
        assert not ({tuple(r) for r in x.tolist()} & val)
        assert not bool(bv.in_heldout_partition(x).any())
        depth = torch.tensor([max(bv.reference_labels(r, 2)[1]) for r in x.tolist()])
        assert int(depth.max()) <= 2
    assert int(task.val_depth.max()) > 2  # the held-out set is not capped: deeper pairs are tested
    info = task.describe()
    assert info["val_strings"] == 400 and sum(info["val_depth_counts"].values()) == info["val_scored"]
    xv, yv = task.get_batch("val", 7, generator=g)
    assert xv.shape == (7, 12) and {tuple(r) for r in xv.tolist()} <= val


def test_variant_partition_is_a_fixed_fifth_of_strings():
    x, _, _ = bv.generate_variant(5000, 16, bv.BracketVariant(types=2, filler=0.2), seed=0)
    frac = float(bv.in_heldout_partition(x).float().mean())
    se = (0.2 * 0.8 / 5000) ** 0.5
    assert abs(frac - 1 / bv.HELDOUT_MODULUS) < 6 * se
    assert torch.equal(bv.in_heldout_partition(x[:50]), bv.in_heldout_partition(x[:50].clone()))


def test_variant_filler_rate_and_vocabulary():
    v = bv.BracketVariant(types=2, filler=0.25)
    x, _, _ = bv.generate_variant(2000, 16, v, seed=1)
    frac = float((x == 4).float().mean())
    assert 0.1 < frac < 0.25  # at most the filler probability (forced brackets), clearly present
    assert v.vocab_size() == 5 and bv.BracketVariant().vocab_size() == 2


@pytest.mark.parametrize("seed", [0, 1])
def test_accuracy_by_distance_and_depth_sum_to_the_overall_accuracy(seed):
    task = bv.BracketVariantTask(14, types=2, filler=0.2, val_size=300, val_seed=seed)
    x, y = task.val
    logits = torch.randn(len(x), 14, 14, generator=torch.Generator().manual_seed(seed))
    logits[..., 0] += 1.0  # some right answers
    per, _ = br.accuracy(logits, y)
    for key in (None, task.val_depth):
        groups = bv.accuracy_by(logits, y, key)
        right = sum(r for r, _ in groups.values())
        count = sum(n for _, n in groups.values())
        assert count == int((y != br.IGNORE).sum()) and right / count == pytest.approx(per, abs=1e-12)
    dist = bv.accuracy_by(logits, y)
    assert min(dist) >= 1 and all(0 <= r <= n for r, n in dist.values())


@pytest.mark.parametrize(
    "kwargs, T, match",
    [
        ({"types": 0}, 8, "types"),
        ({"types": 2.0}, 8, "must be an int"),
        ({"filler": 1.0}, 8, "filler"),
        ({"train_max_depth": -1}, 8, "train_max_depth"),
        ({"source_length": 6}, 8, "source_length"),
        ({}, 7, "even length"),
    ],
)
def test_variant_bad_settings(kwargs, T, match):
    with pytest.raises((ValueError, TypeError), match=match):
        bv.BracketVariantTask(T, **kwargs)


def test_disjoint_split_refuses_when_strings_run_out():
    with pytest.raises(ValueError, match="too few distinct strings"):
        bv.BracketVariantTask(2, disjoint=True, val_size=10)


# ---------------------------------------------------------------------- run finding
def _runs_of(seq, c):
    """(start, length) of every maximal run of letter c."""
    out, i = [], 0
    while i < len(seq):
        if seq[i] == c:
            j = i
            while j < len(seq) and seq[j] == c:
                j += 1
            out.append((i, j - i))
            i = j
        else:
            i += 1
    return out


@pytest.mark.parametrize("T", [8, 32, 64])
def test_runs_hold_one_run_of_the_query_letter_and_isolated_decoys(T):
    from hybrid_attention.tasks.runs import RunsTask, generate_runs

    x, y = generate_runs(500, T, seed=3)
    assert x.shape == y.shape == (500, T) and bool((y[:, :-1] == -100).all())
    decoys = (T - 4) // 8
    for row, lab in zip(x.tolist(), y[:, -1].tolist()):
        c = row[-1] - 8
        assert 0 <= c < 8 and all(t < 8 for t in row[:-1])
        runs = _runs_of(row[:-1], c)
        long = [r for r in runs if r[1] > 1]
        assert len(long) == 1 and long[0][1] == 3 and lab == long[0][0] + 1  # the middle of the run
        assert len(runs) - 1 == decoys  # every decoy placed, isolated
    task = RunsTask(T)
    xa, ya = task.get_batch("train", 4, T, generator=torch.Generator().manual_seed(0))
    xb, _ = task.get_batch("train", 4, T, generator=torch.Generator().manual_seed(0))
    assert torch.equal(xa, xb) and task.vocab_size == 16 and task.val[0].shape == (2000, T)


def test_runs_settings_are_checked():
    from hybrid_attention.tasks.runs import check_runs, generate_runs

    with pytest.raises(ValueError, match="too short"):
        check_runs(6, 8, 3, 2)
    with pytest.raises(ValueError, match="run must be >= 2"):
        check_runs(16, 8, 1, 0)
    with pytest.raises(TypeError, match="letters must be an int"):
        check_runs(16, 8.0, 3, 0)
    with pytest.raises(ValueError, match="n must be a positive int"):
        generate_runs(0, 16)


@pytest.mark.parametrize("T", [16, 32, 64, 128])
def test_runs_decoy_count_can_be_held_fixed_across_lengths(T):
    """``decoys=N``: exactly N isolated decoys at every T (training draws and the held-out set); ``-1`` keeps the
    default, which grows with T."""
    from hybrid_attention.tasks.runs import RunsTask, default_decoys, generate_runs

    x, _ = generate_runs(200, T, seed=5, decoys=2)
    for row in x.tolist():
        c = row[-1] - 8
        runs = _runs_of(row[:-1], c)
        assert sorted(r[1] for r in runs) == [1, 1, 3]
    task = RunsTask(T, decoys=2, val_size=50)
    assert task.decoys == 2
    assert all(len(_runs_of(r[:-1], r[-1] - 8)) == 3 for r in task.val[0].tolist())
    assert RunsTask(T, val_size=5).decoys == default_decoys(T) == (T - 4) // 8


def test_runs_every_decoy_is_placed_at_the_feasibility_edge():
    """The shortest length check_runs accepts for 5 decoys places all 5 in every sequence, however they fall;
    one position less is refused."""
    from hybrid_attention.tasks.runs import check_runs, generate_runs

    T = 3 + 3 * 5 + 1  # the run plus three positions per decoy, and the query token
    x, _ = generate_runs(300, T, seed=0, decoys=5)
    for row in x.tolist():
        assert len(_runs_of(row[:-1], row[-1] - 8)) == 6
    with pytest.raises(ValueError, match="too short for a run of 3 and 5 decoys"):
        check_runs(T - 1, 8, 3, 5)
