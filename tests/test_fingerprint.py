"""Fingerprints group the same message across runs, hosts and processes; suspects name the crash."""

from __future__ import annotations

from pathlib import Path

from postmortem.fingerprint import fingerprint, mask
from postmortem.pipeline import analyze, analyze_text

DATA = Path(__file__).parent / "data"

# Real lines (tests/data/kernel_log/SOURCES.md: xid13-109-pt-main-thread-05, segfault-libnvidia-01)
XID13 = ("[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, "
         "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter")
SEGV = ("[ 8275.824319] zed-editor[11804]: segfault at 25c ip 000075b6d26f2e1a sp 00007ffc262183a0 error 4 in "
        "libnvidia-glcore.so.575.64.03[af2e1a,75b6d2000000+c00000] likely on CPU 10 (core 20, socket 0)")


def only_event(text: str):
    [event] = analyze_text(text).events
    return event


def test_same_message_from_another_gpu_time_and_process_has_the_same_fingerprint():
    other = XID13.replace("11:43:09", "02:17:55").replace("0000:cb:00", "0000:3b:00").replace("GPC 7", "GPC 2")
    assert fingerprint(only_event(XID13)) == fingerprint(only_event(other))
    segv_other = SEGV.replace("11804", "99").replace("000075b6d26f2e1a",
                                                     "00007f0000112e1a").replace("8275.824319", "5.1")
    assert fingerprint(only_event(SEGV)) == fingerprint(only_event(segv_other))


def test_a_different_code_is_a_different_fingerprint():
    xid31 = XID13.replace("): 13,", "): 31,")
    assert fingerprint(only_event(XID13)) != fingerprint(only_event(xid31))
    assert fingerprint(only_event(XID13)) != fingerprint(only_event(SEGV))


def test_mask_hides_what_varies():
    masked = mask('  File "/home/jane/anaconda3/envs/3s/lib/python3.10/threading.py", line 324 in wait')
    assert masked == 'File "<path>/threading.py", line N in wait'
    assert mask("Dec  2 11:38:47 worker4 kernel: x", host="worker4") == "<time> <host> kernel: x"


def test_unexplained_report_names_its_suspects():
    """`info cuda kernels` alone (a real cuda-gdb table) proves no cause: the kernel rows are the suspects."""
    report = analyze([str(DATA / "debugger_log" / "cuda-gdb-info-kernels-chroma.txt")])
    assert report.findings == ()
    assert report.suspects
    assert {report.event(i).kind for i in report.suspects} == {"gpu-kernel"}


def test_explained_report_has_no_suspects():
    report = analyze_text(SEGV)
    assert report.findings and report.suspects == ()
