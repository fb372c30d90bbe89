"""Run inside gdb (-x): every thread's frames, inline ones included, with pc, type, name and file:line."""
import gdb

KINDS = {gdb.NORMAL_FRAME: "normal", gdb.INLINE_FRAME: "inline", gdb.TAILCALL_FRAME: "tailcall",
         gdb.SIGTRAMP_FRAME: "sigtramp", gdb.DUMMY_FRAME: "dummy", gdb.ARCH_FRAME: "arch"}
for thread in sorted(gdb.selected_inferior().threads(), key=lambda t: t.num):
    thread.switch()
    print("THREAD", thread.ptid[1])
    frame = gdb.newest_frame()
    while frame is not None:
        sal = frame.find_sal()
        where = f"{sal.symtab.filename}:{sal.line}" if sal.symtab is not None and sal.line else "None"
        print("FRAME", hex(frame.pc()), KINDS.get(frame.type(), "other"), where, frame.name())
        frame = frame.older()
