"""``python -m benchmarks``: it knows every benchmark script, every one has its block in
docs/benchmarks.md, and a run's printed tables replace exactly that block."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.__main__ import BENCHMARKS, PAGE, replace_block, tables

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
