"""Run inside gdb (-x): the crashed thread's fault under its signal handler, for tests/test_signal_frame.py.

The signal the core records ($_siginfo: the same in every frame, the handler's re-raise), the
handler frame (the one newer than gdb's <signal handler called>), the siginfo the kernel passed
it (its `info` argument, when the handler has one and debug info) and the registers gdb unwinds in
the frame under the trampoline, all in the thread gdb selects (the crashed one), which it names;
tests/data/core/gdb_frames.py gives that thread's frames.
"""
import gdb

print("CRASHED", gdb.selected_thread().ptid[1])
delivered = gdb.parse_and_eval("$_siginfo")
print("DELIVERED", int(delivered["si_signo"]), int(delivered["si_code"]))

REGISTERS = "rip rsp rbp rax rbx rcx rdx rsi rdi r8 r9 r10 r11 r12 r13 r14 r15".split()
frame = gdb.newest_frame()
while frame is not None and frame.type() != gdb.SIGTRAMP_FRAME:
    frame = frame.older()
if frame is not None:
    handler = frame.newer()
    print("HANDLER", handler.name())
    try:
        info = handler.read_var("info").dereference()
        print("SIGINFO", int(info["si_signo"]), int(info["si_code"]),
              hex(int(info["_sifields"]["_sigfault"]["si_addr"])))
    except (ValueError, gdb.error):
        pass
    frame = frame.older()
    for name in REGISTERS:
        print("REG", name, hex(int(frame.read_register(name)) & (1 << 64) - 1))
