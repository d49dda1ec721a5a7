"""``python -m benchmarks``: it knows every benchmark script, every one has its block in
docs/benchmarks.md, and a run's printed tables replace exactly that block."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.__main__ import BENCHMARKS, PAGE, measured, replace_block, tables

ROOT = Path(__file__).resolve().parents[1]


def test_every_benchmark_script_is_run_and_has_its_block():
    scripts = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if not p.stem.startswith("_"))
    assert sorted(BENCHMARKS) == scripts
    page = PAGE.read_text()
    for name in scripts:
        assert page.count(f"<!-- benchmark: {name} -->") == 1 and page.count(f"<!-- /benchmark: {name} -->") == 1, name


def test_the_printed_tables_replace_only_their_block():
    output = "training four_bar...\n| a | b |\n|---|---|\n| 1 | 2 |\nnote\n| c |\n|---|\n| 3 |\n"
    body = tables(output)
    assert body == "| a | b |\n|---|---|\n| 1 | 2 |\n\n| c |\n|---|\n| 3 |"
    page = ("# page\n<!-- benchmark: x -->\nold x\n<!-- /benchmark: x -->\ntext\n"
            "<!-- benchmark: xy -->\nold xy\n<!-- /benchmark: xy -->\n")
    new = replace_block(page, "x", body)
    assert new == page.replace("old x\n", body + "\n", 1) and "old xy" in new
    with pytest.raises(SystemExit, match="no block"):
        replace_block(page, "missing", body)


def test_every_benchmark_prints_a_markdown_table():
    """The runner keeps the lines that start with '|': a script that prints its table in
    another form would never update its block."""
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        if not path.stem.startswith("_"):
            text = path.read_text()
            assert 'print("|' in text or 'print(f"|' in text or 'print("\\n|' in text or "print(head)" in text, path


def test_train_accuracy_asserts_issue_42s_held_out_and_time_targets():
    """The documented misses (the learnt 3-RRR's `shape` 0.148 %, 193 s for 3 DOF; the learnt
    MacPherson's 43 s for 1 DOF and 6 bodies) are reported; models within them, and 1-DOF
    chains of more than 6 bodies (A02 has its own 60 s), are not."""
    from benchmarks.train_accuracy import missed_issue42

    runs = lambda low, shape: {"low": {"nrmse": low}, "shape": {"nrmse": shape}}  # noqa: E731
    assert missed_issue42(runs(3.2e-4, 1.48e-3), 193.0, 3, 7) == [
        "shape 0.148 % > 0.1 % (issue 42)", "the train command took 193 s > 60 s for 3 DOF (issue 42)"]
    assert missed_issue42(runs(2e-5, 3e-5), 43.0, 1, 6) == ["the train command took 43 s > 30 s for 1 DOF (issue 42)"]
    assert missed_issue42(runs(5e-4, 9.9e-4), 59.0, 2, 4) == []
    assert missed_issue42(runs(5e-4, 5e-4), 99.0, 1, 81) == []


def test_a_missed_target_rewrites_its_block_and_a_crash_does_not(tmp_path):
    """benchmarks/_run.py tells a missed target (the script's exit 1, its tables printed) from a
    crash (an uncaught exception, a message instead of a number): only the first has its block
    rewritten; a traceback a benchmark prints itself (targets.py's failed checks) is no crash."""
    import subprocess
    import sys

    runner = ROOT / "benchmarks" / "_run.py"
    cases = {
        "passed": "print('| a |')\nprint('|---|')\nprint('| 1 |')\n",
        "missed": "import sys, traceback\nprint('| a |')\nprint('|---|')\nprint('| 1 |')\n"
                  "try:\n    1 / 0\nexcept ZeroDivisionError:\n    traceback.print_exc()\n"
                  "if __name__ == '__main__':\n    sys.exit(1)\n",
        "crashed": "print('| a |')\nprint('|---|')\nprint('| 1 |')\nraise ValueError('broken')\n",
        "message": "import sys\nprint('| a |')\nprint('|---|')\nsys.exit('no data')\n",
    }
    codes = {}
    for name, text in cases.items():
        script = tmp_path / f"{name}.py"
        script.write_text(text)
        proc = subprocess.run([sys.executable, str(runner), str(script), "--flag"], capture_output=True, text=True)
        codes[name] = (proc.returncode, tables(proc.stdout))
    assert {k: c for k, (c, _) in codes.items()} == {"passed": 0, "missed": 1, "crashed": 70, "message": 70}
    assert [k for k, (c, body) in codes.items() if measured(c, body)] == ["passed", "missed"]
    assert not measured(-9, "| a |") and not measured(2, "| a |") and not measured(0, "")
