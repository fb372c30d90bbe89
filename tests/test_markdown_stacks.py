"""Stacks in the Markdown report (issue 14): runs of recursion folded as in the text and HTML reports,
a bounded number of lines per thread, and the notes that say where a stack is cut or a guess.

The oracle is the JSON report of the same core (every frame), and gdb for the frames themselves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import regex
import zstandard
from click.testing import CliRunner

from gdb_oracle import GDB, gdb_threads, on_the_stack, pairs
from postmortem import cli
from postmortem.debugging import short_name
from postmortem.render import markdown_report
from test_core import GCC, crash
from test_unwind import PROGRAMS

DATA = Path(__file__).parent / "data" / "core"
OVERFLOW = DATA / "stack-overflow.core.zst"
"""A real overflow of tests/data/core/recurse (under `ulimit -s 256`): 2,697 frames of `recurse`, then main."""
GITHUB_COMMENT = 65_536
"""Characters a GitHub issue comment holds at the most."""
FENCE = regex.compile(r"^(`{3,})text\n(.*?)\n\1$", regex.M | regex.S)


def analyze(*args: str) -> str:
    result = CliRunner().invoke(cli.main, ["analyze", *args])
    assert result.exit_code == 0, result.output
    return result.output


def stacks(markdown: str) -> list[list[str]]:
    """The lines of every fenced stack (a fence that follows a thread's title)."""
    return [body.splitlines() for _, body in FENCE.findall(markdown) if body.startswith(("#", "frames ", "第 "))]


def recursion(frames: list[dict]) -> int:
    """How many innermost frames are the same function, read from the JSON report's frames."""
    return next(i for i, frame in enumerate(frames) if frame["symbol"] != frames[0]["symbol"])


def test_a_real_overflow_is_folded_as_the_json_counts_and_gdb_sees(tmp_path):
    """One line for the recursion, with the counts of the JSON report, then every outer frame."""
    [thread] = json.loads(analyze("--format", "json", str(OVERFLOW)))["cores"][0]["threads"]
    frames = thread["frames"]
    depth = recursion(frames)
    assert depth > 2000 and frames[depth]["symbol"] == "main"
    markdown = analyze("--format", "markdown", "--lang", "en", str(OVERFLOW))
    [stack] = stacks(markdown)
    assert stack[0] == f"frames 0-{depth - 1:,}: recurse x {depth:,}"
    outer = frames[depth:]
    assert [line.split()[:2] for line in stack[1:]] == [[f"#{depth + i}", f["pc"]] for i, f in enumerate(outer)]
    assert all(f"!{f['symbol']}+" in line for f, line in zip(outer, stack[1:]))
    assert len(markdown) < GITHUB_COMMENT // 4
    chinese = analyze("--format", "markdown", "--lang", "zh-CN", str(OVERFLOW))
    assert stacks(chinese)[0][0] == f"第 0-{depth - 1:,} 帧：recurse 重复 {depth:,} 次"
    if GDB is None:
        return
    core = tmp_path / "core"
    core.write_bytes(zstandard.ZstdDecompressor().stream_reader(OVERFLOW.open("rb")).read())
    [theirs] = pairs(on_the_stack(gdb_threads(DATA / "recurse", core, cwd=DATA)), short_name).values()
    names = [name for _, name in theirs]
    assert names.index("main") == depth and set(names[:depth]) == {"recurse"}
    assert [pc for pc, _ in theirs[depth:]] == [int(f["pc"], 16) for f in outer[: len(theirs) - depth]]


def test_a_stack_cut_at_the_frame_bound_says_so(monkeypatch):
    """Cut at MAX_FRAMES: the report says why and about how much is left, as the text report does."""
    from postmortem.core import analysis
    monkeypatch.setattr(analysis, "MAX_FRAMES", 1000)
    [thread] = json.loads(analyze("--format", "json", str(OVERFLOW)))["cores"][0]["threads"]
    markdown = analyze("--format", "markdown", "--lang", "en", str(OVERFLOW))
    assert stacks(markdown) == [["frames 0-999: recurse x 1,000"]]
    assert f"- the stack is cut short: {thread['truncated']}" in markdown
    assert f"- about {thread['frames_left']:,} more frames ({thread['stack_left']:,} bytes of stack) not read" \
        in markdown


def test_frames_past_the_bound_per_thread_are_counted(monkeypatch):
    """No fold in the way (a run shorter than MIN_REPEATS): THREAD_FRAMES lines, then a count."""
    from postmortem.render import view
    monkeypatch.setattr(view, "MIN_REPEATS", 10_000)
    [thread] = json.loads(analyze("--format", "json", str(OVERFLOW)))["cores"][0]["threads"]
    [stack] = stacks(analyze("--format", "markdown", "--lang", "en", str(OVERFLOW)))
    shown = markdown_report.THREAD_FRAMES
    assert len(stack) == shown + 1 and stack[-1] == f"… {len(thread['frames']) - shown:,} more frames"


@pytest.mark.skipif(GDB is None, reason="gdb not installed: no reference backtrace to compare with")
@pytest.mark.skipif(GCC is None, reason="gcc not installed: the test program cannot be built")
def test_a_stack_without_recursion_lists_gdbs_frames_one_by_one_and_says_where_it_guesses(tmp_path):
    """A call through a null pointer: 0x0 <- dispatch (found by a stack scan) <- run_loop <- main,
    each frame on its own line with gdb's pc and function, and the note that from #1 on it is a guess
    (`#1` in code there: a tracker makes no issue link of it)."""
    core = crash(tmp_path, "null_pie", programs=PROGRAMS)
    [theirs] = pairs(on_the_stack(gdb_threads(tmp_path / "null_pie", core, cwd=tmp_path)), short_name).values()
    markdown = analyze("--format", "markdown", "--lang", "en", str(core))
    [stack] = stacks(markdown)
    shown = [(int(line.split()[1], 16), line.split()[2]) for line in stack[: len(theirs)]]
    assert [pc for pc, _ in shown] == [pc for pc, _ in theirs]
    assert all(ours.endswith(f"!{name or '??'}") or f"!{name}+" in ours for (_, ours), (_, name) in zip(shown, theirs))
    assert [line.split()[0] for line in stack if line.startswith("#")] == [f"#{i}" for i in range(len(stack))]
    assert "scan: a guess" in stack[1]
    assert "- frame `#1` was found without unwind tables (frame pointers or a stack scan): from it on the stack is " \
           "a guess" in markdown


@pytest.mark.skipif(GDB is None, reason="gdb not installed: no reference backtrace to compare with")
@pytest.mark.skipif(GCC is None, reason="gcc not installed: the test program cannot be built")
def test_threads_past_the_bound_are_counted_and_the_shown_ones_equal_gdb(tmp_path, monkeypatch):
    """Five threads, one aborting: the crashing thread open, OTHER_THREADS others folded, the rest
    counted; each shown stack has gdb's pcs of that thread, in order."""
    from test_core import PROGRAMS as CORE_PROGRAMS
    core = crash(tmp_path, "mt_abort", programs=CORE_PROGRAMS)
    # past main as ours go: which threads the bound shows depends on the core's thread order, main's included
    theirs = pairs(on_the_stack(gdb_threads(tmp_path / "mt_abort", core, cwd=tmp_path,
                                            before=["set backtrace past-main on"])), short_name)
    assert len(theirs) == 5
    monkeypatch.setattr(markdown_report, "OTHER_THREADS", 2)
    markdown = analyze("--format", "markdown", "--lang", "en", str(core))
    titles = regex.findall(r"^(?:Crashing thread|Thread) (\d+)(?: \([^)]*\))?:$", markdown, flags=regex.M)
    assert len(titles) == 3 and "… 2 more threads; all of them with --format json" in markdown
    for tid, stack in zip(titles, stacks(markdown), strict=True):
        pcs = [int(line.split()[1], 16) for line in stack if line.startswith("#")]
        assert pcs == [pc for pc, _ in theirs[int(tid)]][: len(pcs)] and len(pcs) >= 3
