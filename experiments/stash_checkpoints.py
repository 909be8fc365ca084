"""Carry the checkpoints of unfinished plan runs from one working copy to the next (git ignores ``checkpoint.pt``).

A plan's runs resume from their checkpoints, but a fresh clone has none: a run interrupted when a session ends
would start again from step 0. Before the end, ``save`` packs every started, unfinished run under a plan's root
(its files: checkpoint, config, metrics; not the lock) and the checkpoints of the finished runs matching ``--keep``
(e.g. the models a later validation loads) into one archive under ``wip/``, which is committed; ``restore`` unpacks
it into a new working copy, skipping any run whose directory already holds a checkpoint at least as far along
(never overwriting newer work). ``finished`` lists the finished (or diverged) run directories: the ones to commit.

    python -m experiments.stash_checkpoints save results/long_context_2 --keep 'hj-band8_*_s0'
    python -m experiments.stash_checkpoints restore results/long_context_2
    git add $(python -m experiments.stash_checkpoints finished results/long_context_2)
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import json
import sys
import tarfile
from pathlib import Path

from experiments import REPO
from hybrid_attention.apps.claims.runner import run_state

WIP = REPO / "wip"


def archive_path(root: Path) -> Path:
    """The archive of a plan root: ``wip/checkpoints-<root with / as ->.tar``."""
    rel = root.resolve().relative_to(REPO)
    return WIP / f"checkpoints-{'-'.join(rel.parts)}.tar"


def _step(d: Path) -> int:
    """The last step recorded in a run's ``metrics.json`` (0 without one)."""
    try:
        m = json.loads((d / "metrics.json").read_text())
    except (OSError, ValueError):
        return 0
    return int(m.get("step") or (m.get("evals") or [{}])[-1].get("step", 0) or 0)


def save(root: Path, keep: list[str]) -> tuple[Path, int]:
    """Pack the checkpoints (module docstring); returns the archive and the number of runs packed."""
    runs = []
    for ck in sorted(root.glob("*/*/*/checkpoint.pt")):
        d = ck.parent
        state = run_state(d)
        if state == "started" or (state == "finished" and any(fnmatch.fnmatch(d.name, k) for k in keep)):
            runs.append(d)
    path = archive_path(root)
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_suffix(".tar.tmp")
    with tarfile.open(tmp, "w") as tar:
        manifest = {str(d.relative_to(REPO)): _step(d) for d in runs}
        data = json.dumps(manifest, indent=1, sort_keys=True).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for d in runs:
            files = [d / "checkpoint.pt"] if run_state(d) == "finished" else sorted(d.iterdir())
            for f in files:
                if f.is_file() and not f.name.startswith(".") and not f.name.endswith(".tmp"):
                    tar.add(f, arcname=str(f.relative_to(REPO)))
    tmp.replace(path)
    return path, len(runs)


def restore(root: Path) -> tuple[int, int]:
    """Unpack the archive of ``root`` where no checkpoint at least as far along exists; ``(restored, skipped)``."""
    path = archive_path(root)
    if not path.is_file():
        raise FileNotFoundError(f"no archive {path} (nothing was saved for {root})")
    restored = skipped = 0
    with tarfile.open(path) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())
        for rel, step in manifest.items():
            d = REPO / rel
            if (d / "checkpoint.pt").is_file() and _step(d) >= step:
                skipped += 1
                continue
            d.mkdir(parents=True, exist_ok=True)
            for member in tar.getmembers():
                if member.name.startswith(rel + "/") and member.isfile():
                    target = d / Path(member.name).name
                    tmp = target.with_name(target.name + ".tmp")
                    with tar.extractfile(member) as src, open(tmp, "wb") as dst:
                        dst.write(src.read())
                    tmp.replace(target)
            restored += 1
    return restored, skipped


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("action", choices=("save", "restore", "finished"))
    p.add_argument("root", type=Path, help="a plan's root, e.g. results/long_context_2")
    p.add_argument("--keep", nargs="*", default=[], help="finished runs (name patterns) whose checkpoints are kept too")
    args = p.parse_args(argv)
    root = args.root if args.root.is_absolute() else (Path.cwd() / args.root)
    if not root.is_dir():
        p.error(f"root: expected a plan's results directory, got {args.root} (not a directory)")
    if args.action == "finished":
        for m in sorted(root.glob("*/*/*/metrics.json")):
            if run_state(m.parent) in ("finished", "diverged"):
                print(m.parent.relative_to(Path.cwd()) if m.parent.is_relative_to(Path.cwd()) else m.parent)
        return 0
    if args.action == "save":
        path, n = save(root, args.keep)
        print(f"packed the checkpoints of {n} runs into {path.relative_to(REPO)} (commit it)")
    else:
        done, skipped = restore(root)
        print(f"restored {done} checkpoints; {skipped} runs already held one at least as far along")
    return 0


if __name__ == "__main__":
    sys.exit(main())
