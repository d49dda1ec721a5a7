"""Best of K: ``mc2fmu train --seeds K`` trains K seeds and keeps the lowest validation loss.

The accuracy a training reaches depends on the basin its seed lands in, by 4-10x on held-out
runs; the validation loss ranks the seeds the same way (docs/training.md).  The seeds are
``--seed``, ``--seed + 1``, ... ``--seed + K - 1``; each is an ordinary training of its own
in ``MODEL_DIR.seeds/seed-<n>/``, with its own checkpoint there, run as a task of an
executor (a process pool on this machine, or Ray tasks): one torch thread per task, so the
same K and ``--seed`` give the same model whatever the core count.  The kept seed's model directory
becomes MODEL_DIR, with every seed's validation loss, L-BFGS iterations and time in its
training record (``training.ensemble``); ``MODEL_DIR.seeds`` is then removed.

Ctrl-C stops every seed at its next iteration boundary with its state saved (Ray tasks: they
are cancelled, their periodic checkpoints stay); ``--resume`` continues the unfinished ones
(the finished ones are kept).
"""

from __future__ import annotations

import dataclasses
import queue as queue_module
import shutil
import threading
import time
from pathlib import Path
from typing import Callable

from ..errors import TrainingError


def seeds_dir(out_dir) -> Path:
    out_dir = Path(out_dir)
    return out_dir.with_name(out_dir.name + ".seeds")


def member_dir(out_dir, seed: int) -> Path:
    return seeds_dir(out_dir) / f"seed-{seed}"


def train_member(train: Callable, mechanism, runs, config, out: str, reducer, resume: bool, checkpoint_every: float,
                 progress_queue) -> dict:
    """One seed (a task: module level, picklable arguments; ``train`` is mc2fmu.pipeline.train,
    passed by reference): its record, or {"interrupted": ...}."""
    from ..models.artifact import load_artifact
    from ..reducers.base import TrainingInterrupted, checkpoint_path

    seed = config.seed
    if (Path(out) / "model.json").exists():  # finished before an interruption
        art = load_artifact(out)
    else:
        def progress(e: dict) -> None:
            if progress_queue is not None:
                try:
                    progress_queue.put((seed, e))
                except Exception:  # the parent is gone or interrupted: training goes on
                    pass

        try:
            art = train(mechanism, runs, config, out, reducer=reducer, progress=progress,
                        resume=resume and checkpoint_path(out).exists(), checkpoint_every=checkpoint_every)
        except TrainingInterrupted as exc:
            return {"seed": seed, "interrupted": str(exc.checkpoint or "")}
    m = art.training.get("metrics", {})
    return {"seed": seed, "val_loss": float(m.get("val_loss", float("inf"))),
            "lbfgs_iterations": int(m.get("lbfgs_iterations", 0)), "seconds": float(m.get("train_seconds", 0.0))}


def train_seeds(train: Callable, mechanism, runs, config, out_dir, *, seeds: int, reducer: str | None = None,
                progress: Callable[[dict], None] | None = None, resume: bool = False, checkpoint_every: float = 30.0,
                ray_address: str | None = None, slots: int | None = None, keep_members: bool = False):
    """Train ``seeds`` seeds from ``config.seed`` on (``config.dof`` resolved) with ``train``
    (mc2fmu.pipeline.train, one seed each), keep the best;
    returns the kept model's artifact.  ``progress`` gets every seed's entries, each with its
    ``seed``.  ``keep_members``: leave every seed's model in MODEL_DIR.seeds (benchmarks)."""
    from ..models.artifact import load_artifact, save_artifact
    from ..reducers.base import TrainingInterrupted
    from .executors import LocalPool, RayPool, cores

    base = int(config.seed)
    out_dir = Path(out_dir).resolve()  # tasks may run in other working directories (Ray)
    mechanism, runs = str(Path(mechanism).resolve()), [str(Path(r).resolve()) for r in runs]
    folder = seeds_dir(out_dir)
    if folder.exists() and not resume:
        raise TrainingError(f"{folder}: an interrupted --seeds training of {out_dir} left this folder; add --resume "
                            "to continue it, or delete it to start over")
    pool = RayPool(ray_address) if ray_address else LocalPool(min(seeds, slots or cores()))
    folder.mkdir(parents=True, exist_ok=True)
    manager = listener = None
    updates = None
    if progress is not None and isinstance(pool, LocalPool):
        import multiprocessing

        manager = multiprocessing.get_context("spawn").Manager()
        updates = manager.Queue()

        def forward() -> None:
            while True:
                try:
                    item = updates.get(timeout=0.2)
                except queue_module.Empty:
                    if stop.is_set():
                        return
                    continue
                except (EOFError, OSError):
                    return
                seed, e = item
                progress({**e, "seed": seed})

        stop = threading.Event()
        listener = threading.Thread(target=forward, daemon=True)
        listener.start()
    tasks = {str(base + i): (train, mechanism, list(runs), dataclasses.replace(config, seed=base + i, seeds=1),
                             str(member_dir(out_dir, base + i)), reducer, resume, checkpoint_every, updates)
             for i in range(seeds)}
    records, failures, interrupted = [], [], False
    t0 = time.perf_counter()
    try:
        for key, value in pool.run(train_member, tasks):
            if isinstance(value, BaseException):
                failures.append((int(key), str(value)))
            elif "interrupted" in value:
                interrupted = True
            else:
                records.append(value)
                if progress is not None:
                    progress({"stage": "done", "seed": value["seed"], "val": value["val_loss"],
                              "iter": value["lbfgs_iterations"]})
    except KeyboardInterrupt:
        interrupted = True
    finally:
        # local seeds save their state at Ctrl-C before they stop; Ray tasks are cancelled (their
        # periodic checkpoints stay)
        pool.close(wait_for_tasks=not (interrupted and ray_address))
        if listener is not None:
            stop.set()
            listener.join(timeout=2)
        if manager is not None:
            try:
                manager.shutdown()
            except Exception:
                pass
    if interrupted:
        raise TrainingInterrupted(folder)
    if not records:  # a seed that fails (e.g. diverges) is left out; all of them failing is an error
        raise TrainingError([f"--seeds {seeds}: seed {k}: {m}" for k, m in failures] +
                            [f"no seed finished; fix the cause and train again (delete {folder} first)"])
    records.sort(key=lambda r: r["seed"])
    best = min(records, key=lambda r: (r["val_loss"], r["seed"]))
    records += [{"seed": k, "error": m} for k, m in failures]
    records.sort(key=lambda r: r["seed"])
    art = load_artifact(member_dir(out_dir, best["seed"]))
    art.training["ensemble"] = {"seeds": seeds, "base_seed": base, "kept": best["seed"],
                                "wall_seconds": time.perf_counter() - t0, "slots": min(pool.slots, seeds),
                                "members": [{**r, "kept": r["seed"] == best["seed"]} for r in records]}
    save_artifact(out_dir, art)
    if not keep_members:
        shutil.rmtree(folder, ignore_errors=True)
    return art
