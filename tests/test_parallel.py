"""Seed ensembles (``train --seeds K``) and batch conversions on Ray (``mc2fmu batch``).

Ray runs as a local instance on the loopback, started by the command under test and stopped
after it.  The trainings are tiny: these tests check the orchestration (which seed is kept,
what is recorded, resume, skips, failures), not accuracy."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

TINY = ["--dof", "1", "--samples", "64", "--adam-epochs", "5", "--lbfgs-iters", "20"]


@pytest.fixture(scope="module")
def four_bar(reference_run):
    run = reference_run("four_bar", "train")
    low = reference_run("four_bar", "low")
    return Path(run["path"]).parent.parent / "mechanism.toml", run["path"], low["path"]


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mc2fmu.cli", *args], capture_output=True, text=True, timeout=timeout)


def _record(model_dir: Path) -> dict:
    return json.loads((model_dir / "model.json").read_text())["training"]


def test_seeds_keep_the_lowest_validation_loss_and_record_every_seed(four_bar, tmp_path):
    """--seeds 2: the kept model is the seed with the lower validation loss, identical (array
    for array) to that seed trained alone on one thread (each seed's task runs one), and the
    record lists both seeds."""
    mech, run, _ = four_bar
    proc = _cli("train", str(mech), run, *TINY, "--seed", "5", "--seeds", "2", "-o", str(tmp_path / "ens"), "-q")
    assert proc.returncode == 0, proc.stderr
    ens = _record(tmp_path / "ens")["ensemble"]
    assert [m["seed"] for m in ens["members"]] == [5, 6] and ens["seeds"] == 2
    best = min(ens["members"], key=lambda m: m["val_loss"])
    assert ens["kept"] == best["seed"] and [m["kept"] for m in ens["members"]].count(True) == 1
    assert all(m["lbfgs_iterations"] > 0 and m["seconds"] > 0 for m in ens["members"])
    assert ens["members"][0]["val_loss"] != ens["members"][1]["val_loss"]
    assert "kept seed" in proc.stdout and not (tmp_path / "ens.seeds").exists()
    alone = tmp_path / f"seed{best['seed']}"
    proc = _cli("train", str(mech), run, *TINY, "--seed", str(best["seed"]), "--threads", "1", "-o", str(alone), "-q")
    assert proc.returncode == 0, proc.stderr
    a, b = np.load(alone / "arrays.npz"), np.load(tmp_path / "ens" / "arrays.npz")
    assert sorted(a.files) == sorted(b.files) and all(np.array_equal(a[k], b[k]) for k in a.files)
    assert _record(alone)["metrics"]["val_loss"] == best["val_loss"]


def _seed_one_fails(mechanism, runs, config, out, **kw):
    """mc2fmu.pipeline.train, except that seed 1 fails as a diverged training does."""
    from mc2fmu.errors import TrainingError
    from mc2fmu.pipeline import train

    if config.seed == 1:
        raise TrainingError("training ended with non-finite weights (a diverged run)")
    return train(mechanism, runs, config, out, **kw)


def test_a_failed_seed_is_left_out(four_bar, tmp_path):
    """A seed that fails does not sink the ensemble: the others are compared, the failure is
    recorded with its message."""
    from mc2fmu.parallel.seeds import train_seeds
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    mech, run, _ = four_bar
    cfg = TrainConfig(dof=1, samples=64, adam_epochs=5, lbfgs_iters=20, seeds=2)
    art = train_seeds(_seed_one_fails, str(mech), [run], cfg, tmp_path / "m", seeds=2)
    ens = art.training["ensemble"]
    assert ens["kept"] == 0 and ens["members"][0]["kept"] and ens["members"][0]["val_loss"] > 0
    assert ens["members"][1] == {"seed": 1, "error": "training ended with non-finite weights (a diverged run)",
                                 "kept": False}


def test_an_interrupted_ensemble_resumes_to_the_uninterrupted_result(four_bar, tmp_path):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) saves every seed's state in
    MODEL_DIR.seeds; the same command plus --resume ends with the arrays of an uninterrupted
    run.  Without --resume the left-over folder is refused with the fix."""
    mech, run, _ = four_bar
    args = ["train", str(mech), run, "--dof", "1", "--samples", "64", "--adam-epochs", "5", "--lbfgs-iters", "800",
            "--lbfgs-tol", "0", "--lbfgs-floor", "0", "--seeds", "2", "--checkpoint-every", "0"]  # no early stop
    out = tmp_path / "m"
    # SIGINT handled as in a terminal even when the suite runs as a background job (a shell starts
    # those with SIGINT ignored, and Python then installs no KeyboardInterrupt handler)
    proc = subprocess.Popen([sys.executable, "-m", "mc2fmu.cli", *args, "-o", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    seen = ""
    while time.time() < deadline and not all(re.search(rf"seed {k} [^\n\r]*lbfgs", seen) for k in (0, 1)):
        seen += os.read(proc.stderr.fileno(), 65536).decode(errors="replace")  # both seeds in L-BFGS
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err and "--resume" in err
    saved = sorted(p.name for p in (tmp_path / "m.seeds").iterdir())
    assert saved == ["seed-0.checkpoint.pt", "seed-1.checkpoint.pt"], saved
    refused = _cli(*args, "-o", str(out))
    assert refused.returncode == 2 and "add --resume" in refused.stderr
    resumed = _cli(*args, "-o", str(out), "--resume", "-q")
    assert resumed.returncode == 0, resumed.stderr
    whole = _cli(*args, "-o", str(tmp_path / "whole"), "-q")
    assert whole.returncode == 0, whole.stderr
    a, b = np.load(out / "arrays.npz"), np.load(tmp_path / "whole" / "arrays.npz")
    assert all(np.array_equal(a[k], b[k]) for k in a.files)
    assert _record(out)["ensemble"]["kept"] == _record(tmp_path / "whole")["ensemble"]["kept"]


def _jobs(path: Path, mech: Path, run: str, low: str, seed_b: int = 3) -> Path:
    path.write_text(f"""
[defaults]
dof = 1
samples = 64
adam_epochs = 5
lbfgs_iters = 20

[[jobs]]
name = "a"
mechanism = "{mech}"
train = ["{run}"]
validate = ["{low}"]

[[jobs]]
name = "b"
mechanism = "{mech}"
train = ["{run}"]
seed = {seed_b}
interface = "me"

[[jobs]]
name = "broken"
mechanism = "{mech}"
train = ["{run}"]
dof = 7
""")
    return path


@pytest.mark.skipif(__import__("importlib").util.find_spec("ray") is None, reason="ray is not installed")
def test_batch_on_a_local_ray_instance(four_bar, tmp_path):
    """Two tiny jobs and a broken one: the broken one fails alone (exit 1), the others write
    their outputs, summary.json and index.html list all three; a re-run skips the finished jobs
    and retries the failed one; a changed option re-runs only its job."""
    mech, run, low = four_bar
    jobs = _jobs(tmp_path / "jobs.toml", mech, run, low)
    out = tmp_path / "out"
    proc = _cli("batch", str(jobs), "-o", str(out), "--cpus", "2")
    assert proc.returncode == 1, proc.stderr
    summary = {j["name"]: j for j in json.loads((out / "summary.json").read_text())["jobs"]}
    assert [summary[n]["status"] for n in ("a", "b", "broken")] == ["ok", "ok", "failed"]
    assert "--dof 7" in summary["broken"]["error"] and summary["broken"]["fmu"] is None
    assert set(summary["a"]["nrmse"]) == {"train", "low"} and summary["b"]["nrmse"] == {}
    for name in ("a", "b"):
        assert (out / f"{name}.fmu").is_file() and (out / f"{name}.model" / "model.json").is_file()
    assert (out / "a.report" / "index.html").is_file() and not list(out.glob(".*partial*"))
    assert not (out / "broken.fmu").exists() and not (out / "broken.model").exists()
    page = (out / "index.html").read_text()
    assert 'href="a.report/index.html"' in page and "broken" in page and "--dof 7" in page
    assert proc.stderr.count("\n[") + proc.stderr.startswith("[") == 3  # one line per job
    stamp = (out / "a.fmu").stat().st_mtime_ns

    again = _cli("batch", str(jobs), "-o", str(out), "--cpus", "2")
    assert again.returncode == 1
    assert "a: up to date, skipped" in again.stderr and "b: up to date, skipped" in again.stderr
    assert "broken: failed" in again.stderr and (out / "a.fmu").stat().st_mtime_ns == stamp

    _jobs(jobs, mech, run, low, seed_b=4)  # job b's options change
    third = _cli("batch", str(jobs), "-o", str(out), "--cpus", "2")
    assert "a: up to date, skipped" in third.stderr and "b: ok" in third.stderr
    assert (out / "a.fmu").stat().st_mtime_ns == stamp
    assert json.loads((out / "b.model" / "model.json").read_text())["training"]["config"]["seed"] == 4


def test_a_bad_jobs_file_is_refused_before_anything_runs(four_bar, tmp_path):
    mech, run, low = four_bar
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(f"""
[defaults]
lbfgs_iter = 5

[[jobs]]
name = "x"
mechanism = "{mech}"
train = ["{run}", "missing.csv"]
dof = "one"
fmi = 4

[[jobs]]
name = "x"
mechanism = "{mech}"
""")
    proc = _cli("batch", str(jobs), "-o", str(tmp_path / "out"))
    assert proc.returncode == 2 and not (tmp_path / "out").exists()
    err = proc.stderr
    assert "[defaults]: unknown key 'lbfgs_iter'" in err
    assert "jobs[1] (x): train:" in err and "missing.csv: no such file" in err
    assert "jobs[1] (x): fmi = 4: choose one of 2, 3" in err
    assert "jobs[2] (x): name 'x' is used by another job" in err and "jobs[2] (x): train: give a list" in err


def test_training_threads_option_task_environment_and_default(monkeypatch):
    """A training alone runs TRAIN_THREADS (2) torch threads unless told otherwise: --threads,
    a task's own count (a seed or a batch job runs 1), or $MC2FMU_TRAIN_THREADS; a bad value of
    the variable is an error naming it."""
    from mc2fmu.errors import Mc2fmuError
    from mc2fmu.parallel import executors

    monkeypatch.delenv("MC2FMU_TRAIN_THREADS", raising=False)
    assert executors.training_threads() == executors.TRAIN_THREADS == 2
    assert executors.training_threads(3) == 3
    monkeypatch.setenv("MC2FMU_TRAIN_THREADS", "1")
    assert executors.training_threads() == 1 and executors.training_threads(4) == 4
    for bad in ("0", "two", "65", "-1", "\u00b2"):
        monkeypatch.setenv("MC2FMU_TRAIN_THREADS", bad)
        with pytest.raises(Mc2fmuError, match=r"MC2FMU_TRAIN_THREADS=.*from 1 to 64"):
            executors.training_threads()
    for bad in (0, -1, 65, 2.0, True):
        with pytest.raises(Mc2fmuError, match=r"threads=.*from 1 to 64"):
            executors.training_threads(bad)
    monkeypatch.setattr(executors, "_task_threads", 1)
    assert executors.training_threads() == 1 and executors.training_threads(2) == 2
    for bad in ("0", "65", "x", "\u00b2"):  # the CLI's --threads: an argparse error naming the range
        with pytest.raises(SystemExit):
            from mc2fmu.cli import main
            main(["train", "m.toml", "r.csv", "--threads", bad, "-o", "out"])
