"""DXVK's report of a failed GPU allocation (sources/graphics_log.py), on reports people posted: the heaps under it
say whether video memory was full, and only then is the verdict gpu-oom."""

from __future__ import annotations

from postmortem.pipeline import analyze_text

ANNO_1701 = """\
err:   DxvkMemoryAllocator: Memory allocation failed
err:     Size:      4102400
err:     Alignment: 256
err:     Mem flags: 0x6
err:     Mem types: 0x681
err:   Heap 0: 326 MB allocated, 229 MB used, 349 MB allocated (driver), 8001 MB budget (driver), 8192 MB total
err:   Heap 1: 472 MB allocated, 465 MB used, 476 MB allocated (driver), 24030 MB budget (driver), 24030 MB total
terminate called after throwing an instance of 'dxvk::DxvkError'
"""
"""doitsujin/dxvk#1410: a 32-bit game out of address space, 349 of 8001 MB of the GPU's budget allocated."""

RED_FACTION = """\
err:   DxvkMemoryAllocator: Memory allocation failed
err:     Size:      240128
err:     Alignment: 16
err:     Mem types: 0x1f
err:   Heap 0: 287 MB allocated, 31 MB used, 544 MB allocated (driver), 11670 MB
 budget (driver), 12288 MB total
err:   Heap 1: 1025 MB allocated, 992 MB used, 1030 MB allocated (driver), 24047
 MB budget (driver), 24047 MB total
err:   Heap 2: 236 MB allocated, 233 MB used, 245 MB allocated (driver), 0 MB bu
dget (driver), 246 MB total
"""
"""AlpyneDreams/d8vk#62: the terminal wrapped each heap line, once inside a word."""

D9VK_SONIC = """\
err:   DxvkMemoryAllocator: Memory allocation failed
  Size:      24000000
  Alignment: 256
  Mem flags: 0x7
  Mem types: 0x681
err:   Heap 0: 263 MB allocated, 8 MB used, 263 MB allocated (driver), 1345 MB available (driver), 2048 MB total
err:   Heap 1: 333 MB allocated, 188 MB used, 352 MB allocated (driver), 5910 MB available (driver), 5910 MB total
"""
"""misyltoad/d9vk#221: the older wording, `available (driver)` for the budget (doitsujin/dxvk#1100: "the
'available' value corresponds to a budget")."""

WITCHER_3 = """\
0029:err:clipboard:convert_selection Timed out waiting for SelectionNotify event
DxvkMemoryAllocator: Memory allocation failed
terminate called after throwing an instance of 'dxvk::DxvkError'
"""
"""doitsujin/dxvk#747: no heaps printed; the thread found another program holding the video memory."""


def _failure(text: str):
    report = analyze_text(text)
    [event] = [e for e in report.events if e.kind == "gpu-alloc-failed"]
    return report, event


def test_a_failure_with_every_heap_far_from_its_budget_is_not_full_video_memory():
    for text, budget in ((ANNO_1701, 8001), (D9VK_SONIC, 1345)):
        report, event = _failure(text)
        assert event.fields["memory_full"] is False
        assert event.fields["heaps"][0]["budget_mb"] == budget
        assert "gpu-oom" not in [f.cause for f in report.findings]


def test_heap_lines_the_terminal_wrapped_are_read_whole():
    _, event = _failure(RED_FACTION)
    assert [(h["heap"], h["allocated_mb"], h["budget_mb"]) for h in event.fields["heaps"]] == [
        (0, 544, 11670), (1, 1030, 24047), (2, 245, 0)]
    assert event.fields["memory_full"] is False  # heap 2's budget of 0 is not judged
    assert event.fields["size"] == 240128


def test_a_failure_without_heaps_is_read_as_full_video_memory_and_leads():
    report, event = _failure(WITCHER_3)
    assert "memory_full" not in event.fields
    assert report.verdict is not None and (report.verdict.cause, report.verdict.signature) == (
        "gpu-oom", "dxvk-vram-exhausted")
