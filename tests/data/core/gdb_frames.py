"""Run inside gdb (-x): every thread's frames with gdb's frame type, for tests/test_core.py."""
import gdb

KINDS = {gdb.NORMAL_FRAME: "normal", gdb.INLINE_FRAME: "inline", gdb.TAILCALL_FRAME: "tailcall",
         gdb.SIGTRAMP_FRAME: "sigtramp", gdb.DUMMY_FRAME: "dummy", gdb.ARCH_FRAME: "arch"}
for thread in sorted(gdb.selected_inferior().threads(), key=lambda t: t.num):
    thread.switch()
    print("THREAD", thread.ptid[1])
    frame = gdb.newest_frame()
    while frame is not None:
        print("FRAME", hex(frame.pc()), KINDS.get(frame.type(), "other"), frame.name())
        frame = frame.older()
