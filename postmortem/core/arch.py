"""What the core reader must know of each CPU: register layouts, DWARF numbers, calls and signal frames.

One `Arch` per machine a core may come from (x86-64 servers, aarch64 Grace
nodes: GH200, GB200 NVL72). The unwinder, the notes decoder and the signal-frame
reader take one and hold no architecture knowledge of their own. Sources: the
kernel's uapi headers (asm/ptrace.h user_regs_struct / user_pt_regs,
asm/sigcontext.h, asm/ucontext.h), the psABIs' DWARF register numbers (System V
x86-64 psABI 3.6.2; "DWARF for the Arm 64-bit Architecture" 4.1) and the Arm ARM
instruction encodings.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from . import elf


@dataclass(frozen=True)
class Arch:
    """One CPU architecture as the core reader sees it."""

    name: str
    prstatus_registers: tuple[str, ...]
    """pr_reg of NT_PRSTATUS (the kernel's user-visible general registers), in order."""
    dwarf_registers: tuple[str, ...]
    """Register names by DWARF number, as far as the unwinder tracks them."""
    pc: str
    sp: str
    pc_reg: int
    """The unwinder's slot for a frame's pc (x86-64: the return-address column 16, which is rip)."""
    sp_reg: int
    fp_reg: int
    ra_column: int
    """The CFI column holding the return address (x86-64 16; aarch64 30, the link register x30)."""
    link_reg: int | None
    """Where a call leaves its return address when it is not pushed (aarch64: bl/blr write x30)."""
    return_window: int
    """Bytes before a return address that `is_return` looks at."""
    is_return: Callable[[bytes], bool]
    """True when code ending just before a candidate return address is a call instruction."""
    sigreturn_code: tuple[bytes, ...]
    """The bytes of the signal trampolines a handler returns to (the frame after one is the interrupted one)."""
    sigframe_start: int
    """From the trampoline frame's stack pointer to the start of the kernel's signal frame."""
    sigframe_registers: int
    """From the trampoline frame's stack pointer to the interrupted general registers in the kernel's frame."""
    sigcontext_registers: tuple[str, ...]
    """Those registers, in order."""
    sigframe_info: int
    """From the trampoline frame's stack pointer to the siginfo the kernel wrote (when it wrote one)."""
    address_bits: int
    """Bits of a user-space code address: above them an aarch64 return address carries its PAC signature."""

    @property
    def tracked(self) -> int:
        """DWARF registers the unwinder keeps (0 .. tracked - 1) besides the pc slot."""
        return len(self.dwarf_registers)


def _x86_64_is_return(code: bytes) -> bool:
    """call rel32 (e8 + 4 bytes), or a call through a register or memory (ff /2 in its 2, 3, 6 and 7 byte
    forms, with an optional REX prefix) ending at the candidate."""
    if len(code) < 7:
        return False
    if code[-5] == 0xE8:
        return True
    for size in range(2, 8):
        at = -size + (1 if 0x40 <= code[-size] <= 0x4F else 0)
        if code[at] == 0xFF and at + 1 < 0 and (code[at + 1] >> 3) & 7 == 2:
            return True
    return False


AARCH64_CALLS = ((0xFC000000, 0x94000000), (0xFFFFFC1F, 0xD63F0000), (0xFEFFF800, 0xD63F0800))
"""(mask, value) of the aarch64 calls that set x30: BL imm26; BLR Xn; BLRAA/BLRAB/BLRAAZ/BLRABZ (pointer
authentication)."""


def _aarch64_is_return(code: bytes) -> bool:
    if len(code) < 4:
        return False
    word, = struct.unpack("<I", code[-4:])
    return any(word & mask == value for mask, value in AARCH64_CALLS)


X86_64 = Arch(
    name="x86-64",
    prstatus_registers=tuple("r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp "
                             "ss fs_base gs_base ds es fs gs".split()),
    dwarf_registers=tuple("rax rdx rcx rbx rsi rdi rbp rsp r8 r9 r10 r11 r12 r13 r14 r15".split()),
    pc="rip", sp="rsp", pc_reg=16, sp_reg=7, fp_reg=6, ra_column=16, link_reg=None,
    return_window=7, is_return=_x86_64_is_return,
    # glibc's __restore_rt and Go's runtime.sigreturn alike: mov $15 (rt_sigreturn), %rax; syscall
    sigreturn_code=(bytes.fromhex("48c7c00f0000000f05"),),
    # rt_sigframe {pretcode; ucontext uc; siginfo info}: the handler's ret popped pretcode, so the
    # trampoline's stack pointer is &uc; uc_mcontext follows uc_flags, uc_link and uc_stack (40 bytes),
    # and info follows the ucontext (40 + 256-byte sigcontext + 8-byte uc_sigmask).
    sigframe_start=-8, sigframe_registers=40,
    sigcontext_registers=tuple("r8 r9 r10 r11 r12 r13 r14 r15 rdi rsi rbp rbx rdx rax rcx rsp rip".split()),
    sigframe_info=304,
    address_bits=64,
)

AARCH64 = Arch(
    name="aarch64",
    prstatus_registers=(*(f"x{i}" for i in range(31)), "sp", "pc", "pstate"),
    dwarf_registers=(*(f"x{i}" for i in range(31)), "sp"),
    pc="pc", sp="sp", pc_reg=32, sp_reg=31, fp_reg=29, ra_column=30, link_reg=30,
    return_window=4, is_return=_aarch64_is_return,
    # the kernel vDSO's __kernel_rt_sigreturn and qemu-user's trampoline: mov x8, #139 (rt_sigreturn); svc #0
    sigreturn_code=(bytes.fromhex("681180d2010000d4"),),
    # rt_sigframe {siginfo info (128); ucontext uc}: the handler ran with sp = &info; uc_mcontext is at
    # uc + 176 (uc_flags, uc_link, uc_stack, a 1024-bit sigmask, 16-byte aligned), and struct sigcontext
    # starts with fault_address, then regs[31], sp, pc.
    sigframe_start=0, sigframe_registers=128 + 176 + 8,
    sigcontext_registers=(*(f"x{i}" for i in range(31)), "sp", "pc"),
    sigframe_info=0,
    address_bits=48,
)

BY_MACHINE = {elf.EM_X86_64: X86_64, elf.EM_AARCH64: AARCH64}
