"""Logs of Vulkan programs and the layers that translate to Vulkan (DXVK, VKD3D-Proton): their allocator's report.

DXVK writes a failed allocation of GPU memory with the state of every memory heap under it (src/dxvk/
dxvk_memory.cpp):

    err:   DxvkMemoryAllocator: Memory allocation failed
    err:     Size:      4102400
    ...
    err:   Heap 0: 326 MB allocated, 229 MB used, 349 MB allocated (driver), 8001 MB budget (driver), 8192 MB total
    err:   Heap 1: 472 MB allocated, 465 MB used, 476 MB allocated (driver), 24030 MB budget (driver), 24030 MB total

(older releases and d9vk say `available (driver)` for the budget). The failure alone reads as full video memory, and
often is; the heaps say whether it was: a heap whose driver allocation reached FULL of its budget was full, while a
failure with every heap far from its budget is not the GPU's memory running out (a 32-bit game out of address
space, doitsujin/dxvk#1410 and #1318; a driver limit). One `gpu-alloc-failed` event per report, with `memory_full`
True, False, or absent where no heap line follows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .. import later
from ..model import Event
from ..text import Line, TextDoc

NAME = "graphics-log"
ANCHORS = (b"DxvkMemoryAllocator: Memory allocation failed",)
REPORT_LINES = 14
"""Lines of a report after its first: the request (size, alignment, flags, types) and up to a heap per line,
some wrapped by the terminal."""
FULL = 0.9
"""Share of a heap's budget at which it counts as full (the allocator asks for chunks of tens of megabytes)."""

_PREFIX = later.compile(r"^\s*+(?:[0-9a-f]{4}:)?(?:err|warn|info):\s*+")
"""DXVK's level tag (after Wine's thread id), which starts each line it writes; a line without one is the terminal's
wrap of the line before, joined to it as it was cut (`11670 MB` / ` budget (driver)`, `0 MB bu` / `dget`)."""
_REPORT_KEY = later.compile(r"(?:Size|Alignment|Mem flags|Mem types|Heap \d)")
"""What the lines of one report begin with, after their tag."""
_SIZE = later.compile(r"\bSize:\s*+(?P<size>\d{1,15})\b")
_HEAP = later.compile(
    r"Heap\s++(?P<heap>\d{1,2}):\s*+(?P<allocated>\d{1,9})\s++MB\s++allocated,\s*+\d{1,9}\s++MB\s++used,\s*+"
    r"(?:(?P<driver>\d{1,9})\s++MB\s++allocated\s++\(driver\),\s*+)?"
    r"(?P<budget>\d{1,9})\s++MB\s++(?:budget|available)\s++\(driver\),\s*+(?P<total>\d{1,9})\s++MB\s++total")


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    for line in lines:
        if "DxvkMemoryAllocator: Memory allocation failed" not in line.text:
            continue
        report: list[Line] = []
        for nxt in doc.following(line, REPORT_LINES):
            tagged = _PREFIX.match(nxt.text)
            wrapped = not tagged and report and not report[-1].text.rstrip().endswith("total")
            if not (wrapped or _REPORT_KEY.match(nxt.text[tagged.end() if tagged else 0:].lstrip())):
                break  # a line of its own: the report ended (a heap line's wrapped rest carries no tag)
            report.append(nxt)
        text = "".join(f" {_PREFIX.sub('', each.text)}" if _PREFIX.match(each.text) else each.text for each in report)
        heaps = [{"heap": int(m["heap"]), "allocated_mb": int(m["driver"] or m["allocated"]),
                  "budget_mb": int(m["budget"]), "total_mb": int(m["total"])} for m in _HEAP.finditer(text)]
        fields: dict[str, Any] = {"allocator": "dxvk", "heaps": heaps}
        if size := _SIZE.search(text):
            fields["size"] = int(size["size"])
        judged = [h for h in heaps if h["budget_mb"] > 0]
        if judged:
            full = [h for h in judged if h["allocated_mb"] >= FULL * h["budget_mb"]]
            fields["memory_full"] = bool(full)
            fields["heaps_text"] = "; ".join(f"heap {h['heap']}: {h['allocated_mb']} of {h['budget_mb']} MB"
                                             for h in judged)
        last = report[-1] if heaps else line
        yield doc.event("gpu-alloc-failed", line, fields, last=last)
