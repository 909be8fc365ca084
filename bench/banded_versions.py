"""The banded engine of another checkout against this one, in the training step of the ``hj --band W`` arm.

Both engines (``hybrid_attention/banded.py`` and ``banded_block.py`` of ``--ref``, loaded under other module names,
and this checkout's) run the same model, batch and optimiser state in one process, swapped in through
``hybrid_attention.attention.banded``; steps alternate (reference, this, reference, ...) so the machine's load hits
both alike, and each is timed in CPU time (``time.process_time``, one thread). The table gives the medians and the
median of the per-repetition ratios, and the largest difference of the two engines' losses and gradients (they round
differently, nothing else). ``--checkpoint`` loads trained weights (a ``checkpoint.pt`` of a ``train`` run of this
arm; positions and coupling columns tiled when its block size is shorter); the batch is Shakespeare text when
``HYBRID_ATTENTION_DATA`` names it, else random tokens.

    python -m bench.banded_versions --ref /work/main --block-sizes 64 128 --bands 4 8
    python -m bench.banded_versions --ref /work/main --checkpoint runs/hj-band8/checkpoint.pt --bands 8
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from bench.banded import user_flags
from hybrid_attention import attention
from hybrid_attention.apps.train.command import add_arguments
from hybrid_attention.apps.train.flags import config_from_args
from hybrid_attention.model import Transformer


def load_engine(root: Path):
    """``root``'s ``hybrid_attention/banded.py`` as a module whose ``.banded_block`` is ``root``'s too."""
    names = {}
    for stem in ("banded_block", "banded"):
        name = f"hybrid_attention._ref_{stem}"
        src = (root / "hybrid_attention" / f"{stem}.py").read_text()
        src = src.replace("from .banded_block import", "from ._ref_banded_block import")
        spec = importlib.util.spec_from_loader(name, loader=None)
        mod = importlib.util.module_from_spec(spec)
        mod.__package__ = "hybrid_attention"
        sys.modules[name] = mod
        exec(compile(src, str(root / "hybrid_attention" / f"{stem}.py"), "exec"), mod.__dict__)
        names[stem] = mod
    return names["banded"]


def batch(T: int, B: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """``B`` windows of ``T + 1`` characters of the Shakespeare text (vocabulary: its sorted characters), else
    random tokens."""
    g = torch.Generator().manual_seed(seed)
    path = os.environ.get("HYBRID_ATTENTION_DATA")
    if path and Path(path).is_file():
        text = Path(path).read_text()
        index = {c: i for i, c in enumerate(sorted(set(text)))}
        starts = torch.randint(0, len(text) - T - 1, (B,), generator=g).tolist()
        d = torch.tensor([[index[c] for c in text[s : s + T + 1]] for s in starts])
    else:
        d = torch.randint(0, 65, (B, T + 1), generator=g)
    return d[:, :-1], d[:, 1:]


def make_model(T: int, W: int, args: argparse.Namespace) -> Transformer:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = [*user_flags(T, W, args), "--band-shape", "free"]
    cfg = config_from_args(parser.parse_args(flags))
    torch.manual_seed(0)
    model = Transformer(cfg.model_config(65))
    if args.checkpoint:
        saved = torch.load(args.checkpoint, map_location="cpu", weights_only=False)["model"]
        own = model.state_dict()
        for k, v in saved.items():  # a shorter block size: tile positions (wpe) and coupling columns (J_raw)
            own[k] = v.repeat(*(o // s for o, s in zip(own[k].shape, v.shape))) if own[k].shape != v.shape else v
        model.load_state_dict(own)
    return model


def step_fn(model: Transformer, engine, x: torch.Tensor, y: torch.Tensor):
    """One step (forward, backward, AdamW at lr 0: the weights stay put) with ``engine`` as the banded module."""
    opt = torch.optim.AdamW(model.parameters(), lr=0.0)

    def step() -> tuple[float, list[torch.Tensor]]:
        saved = attention.banded
        attention.banded = engine
        try:
            t = time.process_time()
            _, loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            dt = time.process_time() - t
        finally:
            attention.banded = saved
        return dt, [loss.item(), *(p.grad.clone() for p in model.parameters())]

    return step


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ref", type=Path, required=True, help="a checkout whose engine is the reference")
    p.add_argument("--block-sizes", type=int, nargs="+", default=[64, 128])
    p.add_argument("--bands", type=int, nargs="+", default=[4, 8])
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--n-head", type=int, default=1)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--checkpoint", type=Path, default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    ref, new = load_engine(args.ref), attention.banded
    print(f"Command: `python -m bench.banded_versions {' '.join(sys.argv[1:] if argv is None else argv)}`\n")
    print(f"batch {args.batch_size}, n_embd {args.n_embd}, 1 layer, float32, 1 thread, torch {torch.__version__}, "
          f"{'weights of ' + str(args.checkpoint) if args.checkpoint else 'weights at initialisation'}; CPU time, "
          f"median of {args.reps} interleaved reps\n")  # fmt: skip
    print("| T | W | reference ms | this ms | reference / this | loss diff | max rel diff grads |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for T in args.block_sizes:
        x, y = batch(T, args.batch_size)
        for W in args.bands:
            model = make_model(T, W, args)
            run_ref, run_new = step_fn(model, ref, x, y), step_fn(copy.deepcopy(model), new, x, y)
            _, a = run_ref()  # warm-up, and the results of both
            _, b = run_new()
            dg = max(float((u - v).abs().max() / v.abs().max().clamp(min=1e-30)) for u, v in zip(a[1:], b[1:]))
            tr, tn = [], []
            for _ in range(args.reps):
                tr.append(run_ref()[0])
                tn.append(run_new()[0])
            ratio = statistics.median(r / n for r, n in zip(tr, tn))
            print(f"| {T} | {W} | {1e3 * statistics.median(tr):.0f} | {1e3 * statistics.median(tn):.0f} | "
                  f"{ratio:.2f}x | {abs(a[0] - b[0]):.1e} | {dg:.1e} |", flush=True)  # fmt: skip
    print(f"\n{os.cpu_count()} cores, load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
