"""Run inside gdb (`source`): every thread's frames, for tests/gdb_oracle.py to parse.

Per thread a line `THREAD <tid>`, then newest first a line per frame,
`FRAME <pc> <kind> <file:line or None> <name>`: kind is gdb's frame type (inline and tail-call
frames included, the caller decides what to keep); the name goes last as C++ names hold spaces.
It reads only the selected inferior, so it works on a core, a live process or a remote target,
and it selects again the thread that was selected before.
"""
import gdb

MAX_FRAMES = 1_000_000
"""Frames listed per thread at the most: a corrupt stack may make gdb's unwinding run on."""
KINDS = {gdb.NORMAL_FRAME: "normal", gdb.INLINE_FRAME: "inline", gdb.TAILCALL_FRAME: "tailcall",
         gdb.SIGTRAMP_FRAME: "sigtramp", gdb.DUMMY_FRAME: "dummy", gdb.ARCH_FRAME: "arch"}


def where(frame):
    """file:line of the frame's pc as gdb's line table has it, or None."""
    sal = frame.find_sal()
    return f"{sal.symtab.filename}:{sal.line}" if sal.symtab is not None and sal.line else None


threads = gdb.selected_inferior().threads()
if not threads:
    raise gdb.GdbError("no threads to list: neither a core nor a process was loaded")
selected = gdb.selected_thread()
for thread in sorted(threads, key=lambda t: t.num):
    thread.switch()
    print("THREAD", thread.ptid[1] or thread.ptid[0])
    frame = gdb.newest_frame()
    for _ in range(MAX_FRAMES):
        if frame is None:
            break
        print("FRAME", hex(frame.pc()), KINDS.get(frame.type(), "other"), where(frame), frame.name())
        frame = frame.older()
if selected is not None:
    selected.switch()
