"""Tiny Shakespeare, character level (docs/theory.md section 5): corpus location, download with sha256 check, batches.

Where the corpus comes from (first match wins):

1. an explicit path (``--data PATH`` on the command line);
2. the environment variable ``HYBRID_ATTENTION_DATA``;
3. the user cache ``$XDG_CACHE_HOME/hybrid-attention/tinyshakespeare.txt`` (default ``~/.cache/...``), downloaded
   on first use from :data:`URL` and verified against :data:`SHA256`.

A missing file, or a cached/downloaded file with the wrong checksum, raises an error saying how to supply it.
A user-supplied file with a different checksum is used with a warning (legal: another corpus).

Example:
    >>> ds = CharDataset("hello world, hello brackets")
    >>> ds.vocab_size, ds.decode(ds.encode("hello"))
    (15, 'hello')
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "URL",
    "SHA256",
    "ENV_VAR",
    "sha256_file",
    "default_cache_dir",
    "resolve_data_path",
    "download",
    "load_shakespeare",
    "CharDataset",
]

logger = logging.getLogger(__name__)

URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
ENV_VAR = "HYBRID_ATTENTION_DATA"
FILENAME = "tinyshakespeare.txt"
_HOW = (
    f"supply the corpus with --data PATH or the environment variable {ENV_VAR}=PATH "
    f"(download it from {URL}; sha256 {SHA256})"
)


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks (the corpus check here; the corpus hash of a training run
    is the same digest).

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile(delete=False) as f:
        ...     _ = f.write(b"abc")
        >>> sha256_file(f.name)[:16]
        'ba7816bf8f01cfea'
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/hybrid-attention`` or ``~/.cache/hybrid-attention``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hybrid-attention"


def download(
    dest: str | os.PathLike,
    *,
    url: str | None = None,
    sha256: str | None = None,
    opener: Callable[..., Any] | None = None,
    timeout: float = 60.0,
) -> Path:
    """Download ``url`` to ``dest`` atomically, verifying ``sha256`` before the file appears at ``dest``.

    ``url`` and ``sha256`` default to :data:`URL` and :data:`SHA256`; ``opener(url, timeout=...)`` defaults to
    :func:`urllib.request.urlopen` (tests pass a fake one, or a ``file://`` URL).
    Raises ``OSError`` (network) or ``ValueError`` (checksum mismatch; nothing is written).
    """
    url = URL if url is None else url
    sha256 = SHA256 if sha256 is None else sha256
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    opener = urllib.request.urlopen if opener is None else opener
    logger.info("downloading %s to %s", url, dest)
    try:
        with opener(url, timeout=timeout) as resp:
            payload = resp.read()
    except OSError as exc:
        raise OSError(f"could not download Tiny Shakespeare from {url}: {exc}; {_HOW}") from exc
    got = hashlib.sha256(payload).hexdigest()
    if got != sha256:
        raise ValueError(f"downloaded file from {url} has sha256 {got}, expected {sha256}; nothing was saved. {_HOW}")
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".download-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return dest


def resolve_data_path(
    path: str | os.PathLike | None = None,
    *,
    cache_dir: str | os.PathLike | None = None,
    allow_download: bool = True,
    opener: Callable[..., Any] | None = None,
) -> Path:
    """Locate the corpus (explicit path, then ``$HYBRID_ATTENTION_DATA``, then the cache; module docstring).

    Raises:
        FileNotFoundError: an explicit/env path does not exist, or the cache is empty and downloading is off
            or fails (the message says how to supply the file).
        ValueError: the cached or downloaded file has the wrong sha256.
    """
    for source, p in (("--data", path), (ENV_VAR, os.environ.get(ENV_VAR) if path is None else None)):
        if p:
            p = Path(p).expanduser()
            if not p.is_file():
                raise FileNotFoundError(f"Tiny Shakespeare corpus not found at {str(p)!r} (from {source}); {_HOW}")
            if p.stat().st_size == 0:
                raise ValueError(f"corpus file {str(p)!r} (from {source}) is empty; {_HOW}")
            got = sha256_file(p)
            if got != SHA256:
                logger.warning(
                    "%s has sha256 %s, not the Tiny Shakespeare checksum %s: using it as a different corpus",
                    p,
                    got,
                    SHA256,
                )
            return p
    cached = Path(cache_dir) / FILENAME if cache_dir is not None else default_cache_dir() / FILENAME
    if cached.is_file():
        got = sha256_file(cached)
        if got != SHA256:
            raise ValueError(
                f"cached corpus {str(cached)!r} is corrupt (sha256 {got}, expected {SHA256}); "
                f"delete it to download again, or {_HOW}"
            )
        return cached
    if not allow_download:
        raise FileNotFoundError(
            f"Tiny Shakespeare corpus not found (no --data, no {ENV_VAR}, nothing cached at "
            f"{str(cached)!r}, downloading disabled); {_HOW}"
        )
    try:
        return download(cached, opener=opener)
    except OSError as exc:
        raise FileNotFoundError(str(exc)) from exc


class CharDataset:
    """Character-level corpus: vocabulary (sorted distinct characters), encoded ids, 90/10 train/val split.

    Args:
        text: the corpus.
        train_fraction: leading fraction used for training (0.9, the usual split).
    """

    def __init__(self, text: str, train_fraction: float = 0.9) -> None:
        if not isinstance(text, str) or len(text) < 2:
            raise ValueError(
                f"corpus must be a string of at least 2 characters, got {len(text) if isinstance(text, str) else type(text).__name__}"
            )
        if not 0.0 < train_fraction < 1.0:
            raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        if len(text) < 10_000:
            data = torch.tensor([self.stoi[c] for c in text], dtype=torch.int64)
        else:
            codes = _encode_fast(text, self.stoi)
            data = torch.from_numpy(codes).to(torch.int64)
        n = int(train_fraction * len(data))
        self.splits = {"train": data[:n], "val": data[n:]}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, s: str) -> list[int]:
        return [self.stoi[c] for c in s]

    def decode(self, ids: Any) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def get_batch(
        self, split: str, batch_size: int, block_size: int, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Random windows: ``x (B, T)`` and next-character targets ``y (B, T)``."""
        if split not in self.splits:
            raise ValueError(f"split must be 'train' or 'val', got {split!r}")
        data = self.splits[split]
        if len(data) <= block_size:
            raise ValueError(f"the {split} split has {len(data)} characters, too few for block_size {block_size}")
        ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
        offs = torch.arange(block_size)
        x = data[ix[:, None] + offs]
        y = data[ix[:, None] + offs + 1]
        return x, y


def _index_dtype(vocab_size: int) -> Any:
    """The smallest numpy integer dtype that holds ids ``0 .. vocab_size - 1`` (int16 overflows above 32,767)."""
    import numpy as np

    for dt in (np.uint8, np.int16, np.int32):
        if vocab_size - 1 <= np.iinfo(dt).max:
            return dt
    return np.int64


def _encode_fast(text: str, stoi: dict[str, int]) -> Any:
    """Ids of every character of ``text`` as a numpy array of the smallest safe dtype for ``len(stoi)``."""
    import numpy as np

    dt = _index_dtype(len(stoi))
    table = np.zeros(max(map(ord, stoi)) + 1, dtype=dt)
    for c, i in stoi.items():
        table[ord(c)] = i
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    return table[codes]


def load_shakespeare(path: str | os.PathLike | None = None, **kw: Any) -> CharDataset:
    """Resolve the corpus (see :func:`resolve_data_path`), read it as UTF-8 and build a :class:`CharDataset`."""
    p = resolve_data_path(path, **kw)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"corpus {str(p)!r} is not UTF-8 text ({exc}); {_HOW}") from exc
    return CharDataset(text)
