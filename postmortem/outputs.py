"""Where reports and bundles are written: never over an input, never half-written, a clear error otherwise.

Every command with -o checks its output before its work starts (`check_output`):
the folder exists and may be written, the path is no directory, and it is none
of the inputs. Inputs are compared by device and inode, so a hard link, a
symbolic link or another spelling of an input is caught, and every file inside
an input directory counts as one. Trees that are searched rather than read
(--sysroot, --debug-dir) may hold no output at all.

The file is written at the end (`write_output`): into a hidden temporary file
beside it, renamed over it once complete. Nothing half-written is ever left, and
a new report inside an input directory cannot be read as an input of its own
run, since it does not exist while the inputs are read. A device (/dev/null,
/dev/stdout, /dev/full) is written in place; a failed write is an OutputError too.

A folder another user could put names into is no place for an output (`foreign_folder`): one owned by someone
else while running as root, or writable by group or others without the sticky bit and owned by someone else.
Running as root, every folder above it counts too (its owner could swap the folder for a link). Files of a case
folder (`snapshot`, `run`) are created by `create_in`, never over a name that exists already nor through a link.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

Identity = tuple[int, int]
"""(st_dev, st_ino): one file, whatever the path that names it."""
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
"""A case folder's file, or the temporary beside an output, is always a new one: a name planted there (a link, a
FIFO, a file) is refused, not followed."""
NO_LINK_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
"""Opening a path another user may have planted: never through a link at its last name, never waiting on a FIFO
or a device, never taking a controlling terminal, never inherited by a child."""
TEMPORARY_TRIES = 16
"""Names tried for the temporary file beside the output (each is random; a clash is already unlikely)."""


class OutputError(Exception):
    """The output cannot be written where asked; the sentence says why (the command exits 2)."""


@dataclass(frozen=True)
class Output:
    """A checked output: where it goes, and the inputs it must never replace."""

    path: str
    """As the user wrote it, for messages."""
    target: Path
    """The real path written (symbolic links resolved: the file they point to is the one replaced)."""
    device: bool
    """An existing file that is not a regular one (a character device, a FIFO): written in place."""
    inputs: dict[Identity, str]
    """Every input file's identity and the path it was named by."""


def input_identities(paths: Iterable[str]) -> dict[Identity, str]:
    """Each input file and each file under an input directory (walked as the readers walk it, links not followed
    into directories; a file reached through a link counts as the file it points to). One stat per file: the
    analysis opens every one of them anyway."""
    found: dict[Identity, str] = {}
    for path in paths:
        if path == "-":
            continue
        _add(found, path)
        if os.path.isdir(path):
            for folder, _dirs, names in os.walk(path, followlinks=False):
                for name in names:
                    _add(found, os.path.join(folder, name))
    return found


def _add(found: dict[Identity, str], path: str) -> None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return
    found.setdefault((st.st_dev, st.st_ino), path)


def check_output(path: str | os.PathLike, inputs: Iterable[str] = (), trees: Iterable[str] = ()) -> Output:
    """The output at `path` checked before any work: OutputError names what is wrong."""
    shown = os.fspath(path)
    if not shown:
        raise OutputError("the output path is empty")
    target = Path(os.path.realpath(shown))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"cannot write {shown}: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"cannot write {shown}: it is a directory (give a file name)")
    device = st is not None and not stat.S_ISREG(st.st_mode)
    if device:
        if not os.access(target, os.W_OK):
            raise OutputError(f"cannot write {shown}: permission denied")
    else:
        _check_folder(shown, target.parent)
    _refuse_trees(shown, target, trees)
    output = Output(shown, target, device, input_identities(inputs))
    _refuse_inputs(output, st)
    return output


def check_folder_output(path: str | os.PathLike, trees: Iterable[str] = ()) -> Path:
    """A folder that a command fills (--export -o DIR): it, or the nearest folder above it that exists, may be
    written, no other user can put names into it (`foreign_folder`), and it is not inside a tree the command
    reads (where its files would become inputs)."""
    shown = os.fspath(path)
    target = Path(os.path.realpath(shown or "."))
    if target.exists() and not target.is_dir():
        raise OutputError(f"cannot write into {shown}: it is a file, not a folder")
    existing = next(folder for folder in (target, *target.parents) if folder.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write into {shown}: the folder {existing} is not writable")
    _refuse_foreign(shown, [existing], Path(os.path.abspath(shown or ".")))
    _refuse_trees(shown, target, trees)
    return target


def make_case_folder(path: str | os.PathLike) -> Path:
    """The case folder made (or an existing one taken) and checked again once it exists, as its files will be
    written there: its real path, which no other user can put names into (OutputError otherwise)."""
    shown = os.fspath(path)
    try:
        os.makedirs(shown, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot make the case folder {shown}: {exc.strerror or exc}") from None
    target = Path(os.path.realpath(shown))
    _refuse_foreign(shown, [target], Path(os.path.abspath(shown)))
    return target


def create_in(folder: Path, name: str, mode: int = 0o644) -> BinaryIO:
    """A new file `name` in a case folder, open for writing (`mode` reduced by the umask). A name that exists
    already is refused (OutputError), whatever it is: nothing in the folder is written over, nor through a link."""
    try:
        fd = os.open(folder / name, NEW_FILE_FLAGS, mode)
    except FileExistsError as exc:
        raise OutputError(f"cannot write {name} in {folder}: it exists already ({exc.strerror}); "
                          "nothing there is written over or through") from None
    except OSError as exc:
        raise OutputError(f"cannot write {name} in {folder}: {exc.strerror or exc}") from None
    return os.fdopen(fd, "wb")


def foreign_folder(folder: Path) -> str | None:
    """Why another user could put names (links) into the existing `folder`, or None: it is owned by someone else
    while running as root (but the user who ran sudo), or it is writable by group or others without the sticky
    bit and owned by someone else (its owner, or anyone, could replace a name in it between the check and the
    write)."""
    try:
        st = os.stat(folder)
    except OSError:
        return None
    euid = os.geteuid()
    if st.st_uid == euid:
        return None
    if euid == 0 and st.st_uid != _sudo_caller():
        return f"{folder} is owned by {_user_name(st.st_uid)}, not root"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        return (f"{folder} is owned by {_user_name(st.st_uid)} and writable by other users without the sticky bit "
                f"(mode {stat.S_IMODE(st.st_mode):04o})")
    return None


def _sudo_caller() -> int | None:
    """The user who ran `sudo postmortem ...` (SUDO_UID), whose own folders root may write into: that user holds
    root already, so a link they plant there gains them nothing (`sudo postmortem collect -o bundle.tar.gz` in
    one's home folder is the common way to run it)."""
    caller = os.environ.get("SUDO_UID", "")
    return int(caller) if caller.isdigit() and len(caller) < 11 else None


def _refuse_foreign(shown: str, folders: list[Path], named: Path) -> None:
    """The folders checked; running as root, every folder above them and above the path as named too."""
    if os.geteuid() == 0:
        folders = [*folders, *(parent for folder in folders for parent in folder.parents), *named.parents]
    for checked in dict.fromkeys(folders):
        why = foreign_folder(checked)
        if why is not None:
            raise OutputError(f"cannot write into {shown}: {why}: another user could put links in it; "
                              "write into a folder only you can change")


def _user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _refuse_trees(shown: str, target: Path, trees: Iterable[str]) -> None:
    for tree in trees:
        root = os.path.realpath(tree)
        if os.path.commonpath([root, str(target)]) == root:
            raise OutputError(f"{shown} is inside {tree}, which this command reads; write the output elsewhere")


def _check_folder(shown: str, folder: Path) -> None:
    if not folder.exists():
        raise OutputError(f"cannot write {shown}: the folder {folder} does not exist")
    if not folder.is_dir():
        raise OutputError(f"cannot write {shown}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {shown}: the folder {folder} is not writable")
    named = Path(os.path.abspath(shown))
    _refuse_foreign(shown, [folder, named.parent], named)


def _refuse_inputs(output: Output, st: os.stat_result | None) -> None:
    if st is None:
        return
    named = output.inputs.get((st.st_dev, st.st_ino))
    if named is not None:
        same = "" if os.path.realpath(named) == str(output.target) else f" (the same file as the input {named})"
        raise OutputError(f"--output {output.path} is one of the inputs{same}; inputs are never modified")


def write_output(output: Output, write: Callable[[BinaryIO], object], mode: int = 0o666,
                 also: Iterable[str] = ()) -> None:
    """Write through `write`, then put the file in place; `also`: more files read since the check (never replaced).

    `mode` is reduced by the umask like any new file's (a bundle asks for 0o600)."""
    extra = dict(output.inputs)
    for path in also:
        _add(extra, path)
    checked = Output(output.path, output.target, output.device, extra)
    try:
        _refuse_inputs(checked, os.stat(output.target))
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise OutputError(f"cannot write {output.path}: {exc.strerror or exc}") from None
    if output.device:
        try:
            with open(output.target, "wb") as handle:
                write(handle)
        except OSError as exc:
            raise OutputError(f"cannot write {output.path}: {exc.strerror or exc}") from None
        return
    temporary, fd = _temporary_beside(output, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, output.target)
    except OSError as exc:
        _remove(temporary)
        raise OutputError(f"cannot write {output.path}: {exc.strerror or exc}") from None
    except BaseException:
        _remove(temporary)
        raise


def write_text_output(output: Output, text: str) -> None:
    """A report's text as UTF-8 (an unpaired surrogate from a hostile input is written escaped, not fatal)."""
    data = text.encode("utf-8", "backslashreplace")
    write_output(output, lambda handle: handle.write(data))


def _temporary_beside(output: Output, mode: int) -> tuple[str, int]:
    """A new hidden file in the output's folder, created exclusively (never an existing file or a link), open."""
    folder, name = output.target.parent, output.target.name
    for _ in range(TEMPORARY_TRIES):
        candidate = str(folder / f".{name}.{os.urandom(4).hex()}.part")
        try:
            return candidate, os.open(candidate, NEW_FILE_FLAGS, mode)
        except FileExistsError:
            continue
        except OSError as exc:
            raise OutputError(f"cannot write {output.path}: {exc.strerror or exc}") from None
    raise OutputError(f"cannot write {output.path}: no free temporary name in {folder}")


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
