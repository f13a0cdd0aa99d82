"""A home folder and a working folder of a test's own, for paths that start with ``~``."""

from __future__ import annotations

from pathlib import Path

import pytest


def home_and_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Make ``tmp_path/home`` the home folder (``~``) and ``tmp_path/work`` the working folder.

    Args:
        tmp_path: the test's folder.
        monkeypatch: the test's monkeypatch, which undoes both at the end of the test.

    Returns:
        ``(home, work)``, both existing and empty.
    """
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USERPROFILE", str(home))  # Windows' home
    monkeypatch.chdir(work)
    return home, work
