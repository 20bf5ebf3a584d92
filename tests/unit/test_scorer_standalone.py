"""`ifeval_scorer` stands alone: no module of it imports the capsule, and it scores with the capsule
unimportable (prompts from a path, NLTK data in the directory its own settings name)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ifeval_scorer import nltk_data

# Hand-checked verdicts: 1268 wants < 6 sentences (3 here), 2859 wants < 4 (5 here), 2849 wants at
# least 2 words in capitals (HELLO, WORLD). The sentence and capital counts need NLTK's Punkt data.
ROWS = [
    {"key": 1268, "response": "It rains. We stay in. We read."},
    {"key": 2859, "response": "It rains. It pours. We stay in. We read. We sleep."},
    {"key": 2849, "response": "HELLO there, big WORLD."},
]
STRICT = [True, False, True]

BLOCKED = """
import importlib.abc, json, runpy, sys

class NoCapsule(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "capsule" or name.startswith("capsule."):
            raise ModuleNotFoundError(f"capsule is blocked here ({name})")
        return None

sys.meta_path.insert(0, NoCapsule())
prompts, rows, generations = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
from ifeval_scorer import score

scores = score(rows, prompts=prompts)
print(json.dumps([row["strict"]["prompt"] for row in scores.rows]))
sys.argv = ["ifeval_scorer", generations, "--prompts", prompts]
try:
    runpy.run_module("ifeval_scorer", run_name="__main__", alter_sys=True)
except SystemExit as done:
    print("exit", done.code)
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] == "capsule")))
"""


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_scorer_module_imports_the_capsule(repo_root: Path) -> None:
    files = sorted((repo_root / "ifeval_scorer").rglob("*.py"))
    assert len(files) > 20  # every module, the instruction families included
    offenders = {str(path.relative_to(repo_root)): sorted(name for name in _imported_modules(path)
                                                          if name.split(".")[0] == "capsule")
                 for path in files}
    assert {path: names for path, names in offenders.items() if names} == {}


def test_scores_with_the_capsule_unimportable(repo_root: Path, prompts_path: Path, tmp_path: Path) -> None:
    generations = tmp_path / "g.jsonl"
    generations.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    env = {**os.environ, nltk_data.DATA_ENV: str(tmp_path / "nltk")}
    completed = subprocess.run(
        [sys.executable, "-c", BLOCKED, str(prompts_path), json.dumps(ROWS), str(generations)],
        cwd=repo_root, env=env, capture_output=True, text=True, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert json.loads(lines[0]) == STRICT
    assert "prompt_level_strict_acc   66.67  (2/3)" in lines
    assert "exit 0" in lines
    assert json.loads(lines[-1]) == []
    assert [json.loads(line)["strict"]["prompt"] for line in (tmp_path / "g.scores.jsonl").open()] == STRICT
    english = tmp_path / "nltk" / "tokenizers" / "punkt_tab" / "english"
    assert sorted(p.name for p in english.iterdir()) == [
        "abbrev_types.txt", "collocations.tab", "ortho_context.tab", "sent_starters.txt"]


def test_data_dir_order_and_use_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import nltk

    # whatever directory an earlier test in this process chose (the capsule chooses its cache's) is
    # set aside for this test and restored after it
    monkeypatch.setattr(nltk_data, "_chosen", None)
    monkeypatch.setattr(nltk_data, "_ready", None)
    monkeypatch.setenv(nltk_data.DATA_ENV, str(tmp_path / "from-env"))
    assert nltk_data.data_dir() == tmp_path / "from-env"
    monkeypatch.delenv(nltk_data.DATA_ENV)
    assert nltk_data.data_dir().parts[-2:] == ("ifeval_scorer", "nltk_data")
    chosen = tmp_path / "chosen"
    try:
        nltk_data.use_data_dir(chosen)
        assert nltk_data.data_dir() == chosen
        assert not chosen.exists()  # nothing is written before the data is needed
        assert nltk_data.ensure_nltk_data() == chosen
        assert nltk.data.path[0] == str(chosen)
        assert (chosen / "tokenizers" / "punkt_tab" / "english" / "abbrev_types.txt").is_file()
    finally:
        nltk_data.use_data_dir(None)


def test_load_prompts_errors_name_file_and_line(tmp_path: Path) -> None:
    from ifeval_scorer import ScorerInputError, load_prompts

    row = {"key": 5, "prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(row) + "\n\n" + json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(ScorerInputError, match=r"p\.jsonl:3: duplicate key 5$"):
        load_prompts(path)
    path.write_text(json.dumps({"key": 5}) + "\n", encoding="utf-8")
    with pytest.raises(ScorerInputError, match=r"p\.jsonl:1: not an IFEval prompt row"):
        load_prompts(path)
    with pytest.raises(ValueError, match="prompts file not found"):  # a ValueError, for plain callers
        load_prompts(tmp_path / "missing.jsonl")
