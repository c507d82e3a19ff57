"""Words a reader trusts: no merge-conflict marker left in any tracked file, and no example in Python
source that imports a project package by its folder name (everything is installed as ``skewlab.*``).

Read from the files git tracks (their working-tree content), so a marker is caught before it is
committed; outside a git checkout (an unpacked sdist) there is nothing to check.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: git's own rule (``git diff --check``): seven of <, =, >, | at the start of a line, then a space or
#: the end of the line
CONFLICT_MARKER = re.compile(r"^(?:<{7}|={7}|>{7}|\|{7})(?: |$)", re.MULTILINE)
#: ``from storage import ...`` / ``import engine.x`` (also in docstrings and doctest lines)
FOLDER_IMPORT = re.compile(r"^\s*(?:>>> )?(?:from|import) (?:storage|engine|dashboard|bench|shared)\b",
                           re.MULTILINE)


def _tracked_texts() -> dict[str, str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    texts = {}
    for name in names.decode().split("\0"):
        path = ROOT / name
        if not name or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:  # binary (screenshots, figures)
            continue
        texts[name] = data.decode("utf-8", "replace")
    return texts


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def test_no_merge_conflict_markers():
    found = [f"{name}:{_line_of(text, m.start())}: {m.group(0).strip()}"
             for name, text in _tracked_texts().items() for m in CONFLICT_MARKER.finditer(text)]
    assert not found, "merge-conflict markers left in tracked files:\n" + "\n".join(found)


def test_python_examples_import_the_installed_names():
    found = [f"{name}:{_line_of(text, m.start())}: {m.group(0).strip()}"
             for name, text in _tracked_texts().items() if name.endswith(".py")
             for m in FOLDER_IMPORT.finditer(text)]
    assert not found, "imports by folder name (installed as skewlab.*):\n" + "\n".join(found)
