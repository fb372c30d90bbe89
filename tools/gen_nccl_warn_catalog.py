#!/usr/bin/env python3
"""Write tests/data/nccl-warn-catalog.tsv: every `NCCL WARN` wording NCCL can print.

Read from NCCL's own sources (a git checkout of github.com/NVIDIA/nccl), so tests can prove that postmortem gives
every wording a category, not only the ones users posted. Covered: the WARN(...) calls of src/ (plugins/ and
ext-net/ hold none) in master and in the newest release of each minor version from v2.3 on, newest first: a
wording that changed or moved is listed once per file it is printed from, at the newest release that has it.
A wording printed through a macro whose name argument is spliced into the format (SYSCHECK's "Call to " name,
NVMLCHECK's #name) is listed once per caller with the caller's literal and file:line, since NCCL's log prefix names
the caller's file; macros that hand their name on to such a macro (SYSCHECK -> SYSCHECKVAL) count as it.
`WARN("%s", constant)` takes the constant's literal. C string pieces are joined, PRIu64-style macros become their
conversion (%lu) and any other constant in a format becomes %s.

usage: python3 tools/gen_nccl_warn_catalog.py /path/to/nccl[.git] [--check]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from generated import write_or_check

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "nccl-warn-catalog.tsv"
SOURCE = re.compile(r"(?:src|plugins|ext-net)/.*\.(?:cc|c|h|cu|cuh|cpp|hpp)")
RELEASE = re.compile(r"v2\.(\d+)\.(\d+)-(\d+)")
FIRST_MINOR = 3
"""v2.3 is the first release on GitHub with WARN wordings (NCCL 1.x logged none)."""

PRI = {"PRIu64": "lu", "PRIx64": "lx", "PRIX64": "lX", "PRId64": "ld", "PRIi64": "li", "PRIu32": "u", "PRIx32": "x",
       "PRId32": "d", "PRIi32": "i", "PRIu16": "u", "PRIu8": "u", "PRIxPTR": "lx", "PRIuPTR": "lu"}
CALL = re.compile(r"(?<![\w#])WARN\s*\(")
DEFINE = re.compile(r"#[ \t]*define[ \t]+(\w+)\(([^)]*)\)")
HOLE = re.compile(r"\0(\w+)\0")
"""Where a macro's parameter is spliced into its format, until a caller's argument fills it."""


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=True).stdout


def _blank_comments(text: str) -> str:
    """The text with its comments blanked (line breaks kept, so offsets and line numbers stay)."""
    out = list(text)
    at = 0
    while at < len(text):
        if text[at] in "\"'":
            at = _skip_literal(text, at)
        elif text.startswith(("//", "/*"), at):
            end = text.find("\n", at) if text[at + 1] == "/" else text.find("*/", at + 2) + 2
            end = len(text) if end < 2 else end
            for k in range(at, end):
                out[k] = out[k] if text[k] == "\n" else " "
            at = end
        else:
            at += 1
    return "".join(out)


def _skip_literal(text: str, start: int) -> int:
    """The offset just past the string or character literal opening at `start`."""
    at = start + 1
    while at < len(text) and text[at] != text[start]:
        at += 2 if text[at] == "\\" else 1
    return at + 1


def _arguments(text: str, start: int) -> list[str]:
    """The top-level arguments of the call whose `(` ends just before `start`."""
    args: list[str] = []
    depth, piece, at = 0, start, start
    while at < len(text):
        char = text[at]
        if char in "\"'":
            at = _skip_literal(text, at)
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}" and depth:
            depth -= 1
        elif char == ")" or (char == "," and not depth):
            args.append(text[piece:at].strip())
            if char == ")":
                return args
            piece = at + 1
        at += 1
    return args


def _unescape(literal: str) -> str:
    return (literal.replace("\\\n", "").replace('\\"', '"').replace("\\n", "").replace("\\t", " ")
            .replace("\\'", "'").replace("\\\\", "\\"))


def _format(argument: str, params: list[str]) -> str | None:
    """The format a WARN's first argument spells; a macro parameter spliced into it is left as a hole."""
    parts: list[str] = []
    for token in re.finditer(r'"((?:[^"\\]|\\.)*)"|#\s*(\w+)|(\w+)|(\S)', argument, re.DOTALL):
        literal, stringified, name, other = token.groups()
        if literal is not None:
            parts.append(_unescape(literal))
        elif (stringified or name) in params:
            parts.append(f"\0{stringified or name}\0")
        elif name in PRI:
            parts.append(PRI[name])
        elif name or other:
            if other:
                return None  # an expression, not a format
            parts.append("%s")
    return "".join(parts) if any(token.startswith('"') for token in re.findall(r'"|\w+', argument)) else None


def _defines(text: str) -> dict[str, tuple[list[str], str, int]]:
    """Function-like macros: name -> (parameters, body, line)."""
    found = {}
    for define in DEFINE.finditer(text):
        end = define.end()
        while (newline := text.find("\n", end)) >= 0 and text[end:newline].rstrip().endswith("\\"):
            end = newline + 1
        end = len(text) if newline < 0 else newline
        found[define[1]] = ([p.strip() for p in define[2].split(",")], text[define.end():end],
                            text.count("\n", 0, define.start()) + 1)
    return found


def _macro_of(text: str, at: int, defines: dict) -> tuple[str, list[str]] | None:
    """The macro whose body holds offset `at` (its #define line, then the lines a backslash continues), if any."""
    line_start = text.rfind("\n", 0, at) + 1
    while True:
        if define := DEFINE.match(text[line_start:text.find("\n", line_start)].lstrip()):
            return define[1], defines[define[1]][0]
        previous = text.rfind("\n", 0, max(line_start - 1, 0)) + 1
        if line_start == 0 or not text[previous:line_start - 1].rstrip().endswith("\\"):
            return None
        line_start = previous


def release_rows(repo: Path, tag: str) -> list[tuple[str, str, int]]:
    """(format, file, line) of every WARN wording of one release."""
    paths = [p for p in _git(repo, "ls-tree", "-r", "--name-only", tag).decode().splitlines() if SOURCE.fullmatch(p)]
    blobs = _git(repo, "cat-file", "--batch", stdin="".join(f"{tag}:{p}\n" for p in paths).encode())
    files, at = {}, 0
    for path in paths:
        header_end = blobs.index(b"\n", at)
        size = int(blobs[at:header_end].split()[2])
        files[path] = _blank_comments(blobs[header_end + 1:header_end + 1 + size].decode("utf-8", "replace"))
        at = header_end + 2 + size
    defines = {name: value for text in files.values() for name, value in _defines(text).items()}
    rows: list[tuple[str, str, int]] = []
    macros: dict[str, list[tuple[str, list[str], str, int]]] = {}
    for path, text in files.items():
        for call in CALL.finditer(text):
            line = text.count("\n", 0, call.start()) + 1
            args = _arguments(text, call.end())
            macro = _macro_of(text, call.start(), defines)
            fmt = _format(args[0], macro[1] if macro else []) if args else None
            if fmt is None:
                continue
            if fmt == "%s" and len(args) > 1:  # WARN("%s", constant): the constant's words
                constant = re.search(re.escape(args[1]) + r'\s*=\s*"((?:[^"\\]|\\.)*)"', text)
                fmt = _unescape(constant[1]) if constant else fmt
            if macro and HOLE.search(fmt):
                macros.setdefault(macro[0], []).append((fmt, macro[1], path, line))
            else:
                rows.append((fmt, path, line))
    _hand_on(macros, defines)
    for name, wordings in macros.items():
        called = re.compile(r"(?<![\w#])" + name + r"\s*\(")
        for path, text in files.items():
            for call in called.finditer(text):
                if _macro_of(text, call.start(), defines):
                    continue
                args = _arguments(text, call.end())
                for fmt, params, _, _ in wordings:
                    filled = fmt
                    for param, arg in zip(params, args, strict=False):
                        literal = re.fullmatch(r'"((?:[^"\\]|\\.)*)"', arg)
                        filled = filled.replace(f"\0{param}\0", _unescape(literal[1]) if literal else
                                                arg if re.fullmatch(r"\w+", arg) else "%s")
                    rows.append((HOLE.sub("%s", filled), path, text.count("\n", 0, call.start()) + 1))
        rows.extend((HOLE.sub("%s", fmt), path, line) for fmt, _, path, line in wordings)
    return rows


def _hand_on(macros: dict, defines: dict) -> None:
    """Add the macros that pass their own parameter to a wording macro's spliced one (SYSCHECK -> SYSCHECKVAL)."""
    changed = True
    while changed:
        changed = False
        for name, (params, body, line) in defines.items():
            for inner, wordings in list(macros.items()):
                if name in macros or not (call := re.search(r"(?<![\w#])" + inner + r"\s*\(", body)):
                    continue
                args = _arguments(body, call.end())
                for fmt, inner_params, path, _ in wordings:
                    for param, arg in zip(inner_params, args, strict=False):
                        if arg in params:
                            fmt = fmt.replace(f"\0{param}\0", f"\0{arg}\0")
                        elif arg.startswith('"'):
                            fmt = fmt.replace(f"\0{param}\0", _unescape(arg[1:-1]))
                    macros.setdefault(name, []).append((fmt, params, path, line))
                changed = True


def releases(repo: Path) -> list[str]:
    """master, then the newest release of each minor version, newest first."""
    newest: dict[int, tuple[tuple[int, int], str]] = {}
    for tag in _git(repo, "tag").decode().split():
        if (match := RELEASE.fullmatch(tag)) and int(match[1]) >= FIRST_MINOR:
            key = (int(match[2]), int(match[3]))
            if key > newest.get(int(match[1]), ((-1, -1), ""))[0]:
                newest[int(match[1])] = (key, tag)
    return ["master", *(newest[minor][1] for minor in sorted(newest, reverse=True))]


def render(repo: Path) -> str:
    head = _git(repo, "rev-parse", "HEAD").decode().strip()
    seen: dict[tuple[str, str], tuple[int, str]] = {}
    for tag in releases(repo):
        for fmt, path, line in release_rows(repo, "HEAD" if tag == "master" else tag):
            seen.setdefault((fmt, path), (line, tag))
    lines = ["# Every NCCL WARN(...) wording of github.com/NVIDIA/nccl (tools/gen_nccl_warn_catalog.py): master at",
             f"# {head} and the newest release of each minor version from v2.3. format: C pieces joined,",
             "# a macro's name argument filled in per caller; file: path:line at `release` (printed from several",
             "# files: once each).",
             "format\tfile\trelease"]
    lines += [f"{fmt}\t{path}:{line}\t{tag}" for (fmt, path), (line, tag) in
              sorted(seen.items(), key=lambda item: (item[0][1], item[1][0], item[0][0]))]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="a git checkout (or bare clone) of github.com/NVIDIA/nccl")
    parser.add_argument("--check", action="store_true", help="fail when the checked-in catalog differs")
    options = parser.parse_args()
    return write_or_check(OUT, render(options.repo), options.check)


if __name__ == "__main__":
    sys.exit(main())
