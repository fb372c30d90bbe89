#!/usr/bin/env python3
"""Write tests/data/nvrm-catalog.tsv: every `NVRM:` message the NVIDIA kernel module can print to the kernel log.

The catalog is read from the driver's own sources (a git checkout of github.com/NVIDIA/open-gpu-kernel-modules),
so tests can prove that postmortem classifies every wording the driver prints, not only the ones users posted.
Covered: the print calls of kernel-open/nvidia/, kernel-open/common/inc/ and src/nvidia/arch/nvalloc/unix/
(nv_printf, NV_DEV_PRINTF[_STATUS], NV_DMA_DEV_PRINTF and the resource manager's NV_PRINTF, whose lines the
driver prefixes with `NVRM: <function>: `). Calls at an info level are left out: a release driver does not
print them. Each row keeps the format as the C literal spells it (escapes kept), its file:line and its level.

usage: python3 tools/gen_nvrm_catalog.py /path/to/open-gpu-kernel-modules[.git] [--check]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from generated import write_or_check

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "nvrm-catalog.tsv"
SOURCE_DIRS = ("kernel-open/nvidia/", "kernel-open/common/inc/", "src/nvidia/arch/nvalloc/unix/")

CALLS = {
    # call: (index of the format argument, prefix the macro puts before it)
    "nv_printf": (1, ""),
    "NV_DEV_PRINTF": (2, "NVRM: GPU %04x:%02x:%02x.%x: "),
    "NV_DEV_PRINTF_STATUS": (3, "NVRM: GPU %04x:%02x:%02x.%x: "),
    "NV_DMA_DEV_PRINTF": (2, "NVRM: %s: "),
    "NV_PRINTF": (1, "NVRM: {function}: "),
}
LEVELS = {
    "NV_DBG_ERRORS": "error", "NV_DBG_WARNINGS": "warning", "NV_DBG_USERERRORS": "usererror",
    "NV_DBG_SETUP": "setup", "NV_DBG_INFO": "info", "NV_DBG_MEMINFO": "info",
    "LEVEL_FATAL": "error", "LEVEL_HW_ERROR": "error", "LEVEL_ERROR": "error", "LEVEL_WARNING": "warning",
    "LEVEL_NOTICE": "notice", "LEVEL_INFO": "info", "LEVEL_SILENT": "info",
}
"""nv_printf prints NV_DBG_WARNINGS and up by default (os-interface.c cur_debuglevel); NV_DBG_MEMINFO is
NV_DBG_INFO outside debug builds (nv-linux.h)."""
FORMAT_MACROS = {"NV_PCI_DEV_FMT": "%04x:%02x:%02x.%x", "NvU64_fmtx": "llx", "NvU64_fmtu": "llu"}
"""Macros that the sources splice into format literals (nv.h, nvtypes.h)."""

_CALL = re.compile(r"\b(" + "|".join(sorted(CALLS, key=len, reverse=True)) + r")\s*\(")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[A-Za-z_]\w*')
_FUNCTION = re.compile(r"^(?:[A-Za-z_][\w \*]*[ \*])?(?P<name>[A-Za-z_]\w*)\s*(?:\((?!.*;)|$)")
_NOT_FUNCTIONS = frozenset({"if", "while", "for", "switch", "return", "sizeof"})


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def _skip_literal(text: str, start: int) -> int:
    """The index after the string or char literal that opens at `start`."""
    quote, i = text[start], start + 1
    while text[i] != quote:
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _arguments(text: str, start: int) -> list[str] | None:
    """The top-level arguments of the call whose `(` ends just before `start`; None when it never closes."""
    depth, i = 1, start
    current: list[str] = []
    found: list[str] = []
    while i < len(text):
        char = text[i]
        if char in "\"'":
            end = _skip_literal(text, i)
            current.append(text[i:end])
            i = end
            continue
        if text.startswith("//", i):
            i = text.index("\n", i)
            continue
        if text.startswith("/*", i):
            i = text.index("*/", i) + 2
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return [*found, "".join(current).strip()]
        elif char == "," and depth == 1:
            found.append("".join(current).strip())
            current = []
            i += 1
            continue
        current.append(char)
        i += 1
    return None


def _format(argument: str) -> str | None:
    """The format literal an argument spells (adjacent literals joined, known macros spliced in)."""
    parts = []
    for token in _TOKEN.findall(argument):
        if token.startswith('"'):
            parts.append(token[1:-1])
        elif token in FORMAT_MACROS:
            parts.append(FORMAT_MACROS[token])
        else:
            return None  # a format passed through a variable: its wording is elsewhere
    return "".join(parts) if parts else None


def _function_at(lines: list[str], number: int) -> str:
    """The C function whose body holds line `number` (1-based): the nearest definition above it.

    A definition starts at column 0, its `(` on the same line or (the resource manager's style) the next.
    """
    for at in range(number - 2, 0, -1):
        line, after = lines[at], lines[at + 1]
        m = _FUNCTION.match(line)
        if m and m["name"] not in _NOT_FUNCTIONS and not line.startswith("#") and (
                line.rstrip().endswith("(") or "(" in line or after.startswith("(")):
            return m["name"]
    return "?"


def catalog(repo: Path) -> list[tuple[str, str, str]]:
    rows = []
    files = [f for f in _git(repo, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
             if f.startswith(SOURCE_DIRS) and f.endswith((".c", ".h"))]
    for path in files:
        text = _git(repo, "show", f"HEAD:{path}")
        lines = text.splitlines()
        for call in _CALL.finditer(text):
            number = text.count("\n", 0, call.start()) + 1
            if lines[number - 1].lstrip().startswith(("#", "//", "*")):
                continue  # a macro's definition or a comment, not a print
            index, prefix = CALLS[call[1]]
            arguments = _arguments(text, call.end())
            if arguments is None or len(arguments) <= index:
                continue
            level = LEVELS.get(arguments[0], "")
            body = _format(arguments[index])
            if level in ("", "info") or body is None:
                continue
            if "{function}" in prefix:
                prefix = prefix.format(function=_function_at(lines, number))
            rows.append((prefix + body, f"{path}:{number}", level))
    return [row for row in rows if row[0].startswith("NVRM")]


def render(repo: Path, rows: list[tuple[str, str, str]]) -> str:
    described = _git(repo, "log", "-1", "--format=%H %s").strip()
    head = ["# Every NVRM message the NVIDIA open kernel modules print above info level (tools/gen_nvrm_catalog.py).",
            f"# Source: https://github.com/NVIDIA/open-gpu-kernel-modules at {described}.",
            "# format: the C format literal (escapes kept; `NVRM: <function>: ` is what NV_PRINTF puts before its",
            "# words); file: path:line in that tree; level: the driver's print level.",
            "format\tfile\tlevel"]
    return "\n".join([*head, *("\t".join(row) for row in rows)]) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="a checkout or git directory of open-gpu-kernel-modules")
    parser.add_argument("--check", action="store_true", help="fail when the checked-in catalog differs")
    args = parser.parse_args()
    text = render(args.repo, catalog(args.repo))
    if not args.check:
        print(f"{OUT}: {text.count(chr(10)) - 5} rows", file=sys.stderr)
    return write_or_check(OUT, text, args.check)


if __name__ == "__main__":
    sys.exit(main())
