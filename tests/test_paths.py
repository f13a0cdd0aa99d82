"""The output-path rule (gradlab.paths): checked before any work, nothing created by the check."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from gradlab.errors import GradlabError
from gradlab.paths import check_output_file, check_output_folder, check_own_output_file
from tests.helpers.home import home_and_work

needs_proc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_new_file_in_an_existing_folder_is_accepted_and_not_created(tmp_path):
    target = tmp_path / "records.json"
    assert check_output_file(str(target), argument="--json") == target
    assert check_output_file(target, argument="--json") == target
    assert _tree(tmp_path) == []


def test_an_existing_file_may_be_replaced(tmp_path):
    target = tmp_path / "records.json"
    target.write_text("old")
    assert check_output_file(target, argument="--markdown") == target
    assert target.read_text() == "old"


@pytest.mark.parametrize(
    ("relative", "fragment"),
    [
        ("missing/deeper/x.json", "does not exist"),
        ("afile/x.json", "is a file, not a folder"),
        ("afolder", "which is a folder"),
    ],
)
def test_file_paths_that_cannot_be_written_are_refused_and_nothing_is_created(
    tmp_path, relative, fragment
):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "afolder").mkdir()
    before = _tree(tmp_path)
    with pytest.raises(GradlabError, match=fragment) as caught:
        check_output_file(tmp_path / relative, argument="--json")
    assert str(caught.value).startswith("--json ")
    assert repr(str(tmp_path / relative)) in str(caught.value)
    assert _tree(tmp_path) == before


@needs_proc
@pytest.mark.parametrize("path", ["/proc/x.json", "/proc/gradlab-never/x.json"])
def test_file_paths_under_proc_are_refused(path):
    with pytest.raises(GradlabError, match=r"^--json "):
        check_output_file(path, argument="--json")
    assert not os.path.exists(path)


def test_a_missing_folder_with_missing_parents_is_accepted_and_not_created(tmp_path):
    target = tmp_path / "runs" / "a" / "b"
    assert check_output_folder(str(target), argument="log_dir") == target
    assert _tree(tmp_path) == []
    assert check_output_folder(tmp_path, argument="--out") == tmp_path


@pytest.mark.parametrize(
    ("relative", "fragment"),
    [("afile", "which is an existing file"), ("afile/sub/deeper", "is a file")],
)
def test_folder_paths_on_files_are_refused(tmp_path, relative, fragment):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(GradlabError, match=fragment) as caught:
        check_output_folder(tmp_path / relative, argument="--out")
    assert str(caught.value).startswith("--out must be a folder")
    assert _tree(tmp_path) == ["afile"]


@needs_proc
def test_a_folder_under_proc_is_refused():
    with pytest.raises(GradlabError, match=r"^log_dir must be a folder gradlab can write"):
        check_output_folder("/proc/x", argument="log_dir")
    assert not os.path.exists("/proc/x")


@pytest.mark.parametrize("bad", [None, 3, b"bytes"])
@pytest.mark.parametrize("check", [check_output_file, check_output_folder])
def test_a_value_that_is_not_a_path_is_refused_by_name(check, bad):
    with pytest.raises(GradlabError, match=r"^out_path must be a (file|folder) path") as caught:
        check(bad, argument="out_path")
    assert str(caught.value).endswith(f"path (str or os.PathLike); got {bad!r}")


@pytest.mark.parametrize("empty", ["", "   "])
@pytest.mark.parametrize(("check", "kind"), [(check_output_file, "file"),
                                             (check_output_folder, "folder")])  # fmt: skip
def test_an_empty_path_is_refused_as_empty(check, kind, empty):
    # on the command line (--out "") the type of the value is no news: its emptiness is
    with pytest.raises(GradlabError) as caught:
        check(empty, argument="--out")
    assert str(caught.value) == f"--out must be a non-empty {kind} path; got {str(empty)!r}"


def test_each_refusal_names_the_argument_the_path_and_the_reason(tmp_path):
    (tmp_path / "afile").write_text("x")
    missing, under = tmp_path / "missing" / "x.json", tmp_path / "afile" / "x.json"
    cases = [
        (check_output_file, missing,
         f"--json must be a file in an existing folder; got {str(missing)!r}, but the folder "
         f"{str(missing.parent)!r} does not exist (gradlab creates no folder for a file: create "
         "it first)"),
        (check_output_file, under,
         f"--json must be a file in an existing folder; got {str(under)!r}, but "
         f"{str(under.parent)!r} is a file, not a folder"),
        (check_output_folder, tmp_path / "afile",
         f"--json must be a folder or a path where one can be created; got "
         f"{str(tmp_path / 'afile')!r}, which is an existing file"),
        (check_output_folder, tmp_path / "afile" / "sub",
         f"--json must be a folder or a path where one can be created; got "
         f"{str(tmp_path / 'afile' / 'sub')!r}, but {str(tmp_path / 'afile')!r} is a file"),
    ]  # fmt: skip
    for check, path, message in cases:
        with pytest.raises(GradlabError) as caught:
            check(path, argument="--json")
        assert str(caught.value) == message


@needs_proc
def test_a_folder_that_takes_no_new_file_is_named():
    with pytest.raises(GradlabError) as caught:
        check_output_file("/proc/x.json", argument="--json")
    assert str(caught.value) == ("--json must be a path gradlab can write; got '/proc/x.json', "
                                 "and files cannot be written in '/proc'")


def test_a_dangling_link_into_a_missing_folder_is_refused_before_any_work(tmp_path):
    # it passed the check, and the write failed after the whole audit had run
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "missing" / "x.json")
    with pytest.raises(GradlabError) as caught:
        check_output_file(link, argument="--json")
    assert str(caught.value) == (
        f"--json must be a file in an existing folder; got {str(link)!r}, a link to "
        f"{str(tmp_path / 'missing' / 'x.json')!r}, whose folder does not exist (remove the "
        "link or create the folder first)")
    assert not (tmp_path / "missing").exists()


def test_a_dangling_link_into_an_existing_folder_is_accepted(tmp_path):
    (tmp_path / "target").mkdir()
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "target" / "x.json")
    assert check_output_file(link, argument="--json") == link
    assert not (tmp_path / "target" / "x.json").exists()  # nothing created


@pytest.mark.parametrize(("check", "given", "expected"), [
    (check_output_folder, "~/runs/a", "runs/a"), (check_output_folder, "~", "."),
    (check_output_file, "~/records.json", "records.json")])  # fmt: skip
def test_a_leading_tilde_is_the_home_folder(tmp_path, monkeypatch, check, given, expected):
    home, work = home_and_work(tmp_path, monkeypatch)
    assert check(given, argument="--out") == home / expected
    assert check(Path(given), argument="--out") == home / expected
    assert _tree(work) == [] and _tree(home) == []


def test_a_tilde_inside_a_path_is_a_name(tmp_path, monkeypatch):
    home_and_work(tmp_path, monkeypatch)
    assert check_output_folder("runs/~", argument="--out") == Path("runs/~")


def test_a_tilde_of_no_known_user_is_refused(tmp_path, monkeypatch):
    home_and_work(tmp_path, monkeypatch)
    with pytest.raises(GradlabError) as caught:
        check_output_folder("~gradlab_no_such_user/run", argument="log_dir")
    assert str(caught.value) == (
        "log_dir must be a folder path; got '~gradlab_no_such_user/run', whose leading "
        "'~gradlab_no_such_user' names no home folder known here"
    )


@pytest.mark.parametrize("name", ["new/", "fresh.json/"])
def test_a_file_path_ending_in_a_separator_is_refused(tmp_path, name):
    # `--json out/new/` ran the whole audit, then wrote a file named 'new'
    given = f"{tmp_path}/{name}"
    with pytest.raises(GradlabError) as refused:
        check_output_file(given, argument="--json")
    assert str(refused.value) == (f"--json must be a file path; got {given!r}, which names a "
                                  "folder (it ends in a separator): add the file's name")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("below", [False, True])
def test_a_folder_at_or_under_a_dangling_link_is_refused(tmp_path, below):
    # `--out link` to nothing passed the check, and the work ended with 'File exists'
    link = tmp_path / "latest"
    link.symlink_to(tmp_path / "gone")
    given = link / "figures" if below else link
    with pytest.raises(GradlabError) as refused:
        check_output_folder(given, argument="--out")
    assert str(refused.value) == (
        f"--out must be a folder or a path where one can be created; got {str(given)!r}, but "
        f"{str(link)!r} is a link to {str(tmp_path / 'gone')!r}, which does not exist (remove "
        "the link or create its target first)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest"]


@pytest.mark.parametrize(("check", "kind"), [(check_output_file, "file"),
                                             (check_output_folder, "folder")])
def test_a_dash_is_refused_not_taken_as_a_name(tmp_path, monkeypatch, check, kind):
    # study --out -, audit --markdown - and the like wrote a file or folder named "-"
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GradlabError) as raised:
        check("-", argument="--out")
    assert str(raised.value) == (f"--out must be a {kind} path; got '-', which gradlab does not "
                                 f"read as standard output: name a {kind} (./- or Path('-') for "
                                 "one named -)")
    for named in ("./-", Path("-")):  # a file or folder named - on purpose
        assert check(named, argument="--out") == Path("-")
    assert list(tmp_path.iterdir()) == []


def _own(path, recognise):
    return check_own_output_file(path, argument="--json", written_by="an earlier x --json output",
                                 recognise=recognise)  # fmt: skip


def test_an_existing_file_is_replaced_only_when_empty_or_recognised(tmp_path):
    ours, empty, theirs = tmp_path / "ours.json", tmp_path / "empty.json", tmp_path / "log.jsonl"
    ours.write_text("[]")
    empty.touch()
    theirs.write_text('{"step": 0}\n')
    recognise = lambda path: path.read_text() == "[]"  # noqa: E731
    assert _own(ours, recognise) == ours
    assert _own(empty, lambda path: pytest.fail("an empty file is not read")) == empty
    assert _own(tmp_path / "new.json", recognise) == tmp_path / "new.json"
    with pytest.raises(GradlabError) as raised:
        _own(theirs, recognise)
    assert str(raised.value) == (f"--json would replace {str(theirs)!r}, an existing file that is "
                                 "not an earlier x --json output; name another file, or move that "
                                 "one away first")  # fmt: skip
    assert theirs.read_text() == '{"step": 0}\n'


def test_a_file_that_cannot_be_read_is_not_recognised(tmp_path):
    binary = tmp_path / "weights.bin"
    binary.write_bytes(b"\xff\xfe\x00")

    def denied(path):
        raise PermissionError(13, "Permission denied", str(path))

    for recognise in (lambda path: path.read_text(encoding="utf-8") == "[]", denied):
        with pytest.raises(GradlabError) as raised:
            _own(binary, recognise)
        assert str(raised.value) == (f"--json would replace {str(binary)!r}, an existing file "
                                     "that is not an earlier x --json output; name another file, "
                                     "or move that one away first")  # fmt: skip
    assert binary.read_bytes() == b"\xff\xfe\x00"


@pytest.mark.skipif(not os.path.exists(os.devnull) or sys.platform == "win32",
                    reason="a character device")  # fmt: skip
def test_the_null_device_is_not_read(tmp_path):
    assert _own(os.devnull, lambda path: pytest.fail("read")) == Path(os.devnull)


@pytest.mark.parametrize("check", [check_output_file, check_output_folder])
def test_names_and_paths_longer_than_the_file_system_takes_are_refused(tmp_path, check):
    name = "é" * 130  # 130 characters, 260 bytes in UTF-8: the limit counts bytes
    with pytest.raises(GradlabError) as refused:
        check(tmp_path / name, argument="log_dir")
    assert str(refused.value) == (f"log_dir must be a path the file system takes; got a name of "
                                  f"260 bytes ({name[:40]!r}...), longer than it allows")
    deep = tmp_path.joinpath(*["d" * 200] * 25)  # each name fits, the whole path does not
    with pytest.raises(GradlabError) as refused:
        check(deep, argument="log_dir")
    assert str(refused.value) == (f"log_dir must be a path the file system takes; got a path of "
                                  f"{len(os.fsencode(str(deep)))} bytes, longer than it allows")
    assert list(tmp_path.iterdir()) == []
    assert check(tmp_path / ("a" * 255), argument="log_dir").name == "a" * 255  # at the limit
    # under a folder that does not exist yet: the system answered "no such folder" first
    with pytest.raises(GradlabError, match="got a name of 300 bytes"):
        check(tmp_path / "new" / ("a" * 300) / "x", argument="log_dir")


@pytest.mark.parametrize("check", [check_output_file, check_output_folder])
def test_a_path_too_long_in_whole_is_named_so_when_its_names_are_at_the_limit(tmp_path, check):
    # every name exactly 255 bytes (each taken), the whole path past 4096 bytes
    deep = tmp_path.joinpath(*["n" * 255] * 17)
    with pytest.raises(GradlabError) as refused:
        check(deep, argument="--out")
    assert str(refused.value) == (f"--out must be a path the file system takes; got a path of "
                                  f"{len(os.fsencode(str(deep)))} bytes, longer than it allows")


def test_the_current_folder_is_a_folder_and_no_file(tmp_path, monkeypatch):
    # "." has no name parts at all
    monkeypatch.chdir(tmp_path)
    assert check_output_folder(".", argument="--out") == Path(".")
    with pytest.raises(GradlabError, match=re.escape("got '.', which is a folder")):
        check_output_file(".", argument="--json")


@pytest.mark.parametrize("check", [check_output_file, check_output_folder])
def test_a_name_the_file_system_itself_finds_too_long_is_refused(tmp_path, monkeypatch, check):
    # a file system with limits of its own (shorter than Linux's): the lookup's answer decides
    import errno

    short = tmp_path / ("s" * 100)
    real_lstat = os.lstat

    def lstat(path, *args, **kwargs):
        if os.fspath(path) == os.fspath(short):
            raise OSError(errno.ENAMETOOLONG, "File name too long", os.fspath(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    with pytest.raises(GradlabError) as refused:
        check(short, argument="--out")
    assert str(refused.value) == (f"--out must be a path the file system takes; got a path of "
                                  f"{len(os.fsencode(str(short)))} bytes, longer than it allows")
