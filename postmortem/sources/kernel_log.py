"""Kernel logs: dmesg, dmesg -T, kern.log/syslog, journalctl (short, short-iso, json).

The same kernel message reaches us under many prefixes: `[ 123.456]`,
`[Fri Aug 30 11:43:09 2024]`, `Sep 18 20:07:01 host kernel:`, an RFC 3339
stamp, a journald JSON object, a syslogd wall broadcast, or a `> ` quote pasted
into an issue. Each line is split into a prefix (when, where) and a body; the
body patterns are searched, never anchored, so unknown prefixes do not matter.

Times:
- dmesg seconds since boot go into fields["uptime"].
- Wall stamps become `Event.time`: naive unless the log gives a zone.
- Syslog stamps carry no year. The year is taken from the first stamp in the
  same input that has one (dmesg -T, ISO, journald JSON), and fields["joined"]
  says so; a month that goes backwards (Dec -> Jan) moves to the next year.
  When none does, the event has no time: its clock is model.YEARLESS and
  fields["stamp"] keeps the stamp as written (join may still find the year in
  another input of the incident).
- A line with both a wall stamp and an uptime fixes the boot time; uptime-only
  lines of the same input and boot are then placed on the wall clock too
  (clock "uptime+boot").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import regex

from .. import knowledge, later
from ..join import shifted
from ..model import YEARLESS, Event, dated, month_number
from ..text import Line, TextDoc

NAME = "kernel-log"
ANCHORS: tuple[bytes, ...] = (
    b"NVRM: Xid",
    b"SXid (PCI:",
    b"fallen off the bus",
    b"RmInitAdapter failed",
    b"rm_init_adapter failed",
    b"NVRM: GPU at PCI:",
    b"NVRM: loading NVIDIA",
    b"Linux version ",
    b"segfault at ",
    b"general protection fault ip:",
    b"trap invalid opcode ip:",
    b"Killed process ",
    b"Kill process ",
    b"killed as a result of limit of",
    b"oom-kill:", b"invoked oom-killer",
    b"blocked for more than",
    b"state:D ",  # a hung task's `task:X state:D ...` line, pasted without the header above it
    b"soft lockup",
    b"hard LOCKUP",
    b"detected stall",
    b"detected expedited stall",
    b"AER: ",
    b"PCIe Bus Error",
    b"Machine Check Exception",
    b"Fatal machine check",
    b"Fatal Machine check",
    b"[Hardware Error]",
    b"EDAC ",
    b"NVRM: ",
    b"NVRM ",  # the early open modules wrote "NVRM kgspInitRm_IMPL: ..." without the colon
    b"Kernel panic",
    b"Kernel Panic",
    b"Oops: ",
    b"BUG: unable to handle",
    b"BUG: kernel NULL pointer",
    b"kernel BUG at",
    b"general protection fault, ",
    b"general protection fault: ",
)

REPEATS: tuple[bytes, ...] = (
    b"NVRM: Xid", b"SXid (PCI:", b"fallen off the bus", b"RmInitAdapter failed", b"rm_init_adapter failed",
    b"NVRM: GPU at PCI:", b"NVRM: ", b"NVRM ", b"segfault at ", b"general protection fault ip:",
    b"trap invalid opcode ip:", b"blocked for more than", b"soft lockup", b"hard LOCKUP", b"detected stall",
    b"detected expedited stall", b"EDAC ",
)
"""Anchors of one-line reports: identical repeats (an Xid storm) fold while the log is read (text.TextDoc.scan).
Panics, oopses, AER and MCE reports read the lines after them and never fold."""

MAX_UPTIME = 100 * 365 * 86400.0
"""Longest uptime (seconds) believed: no kernel has run for a century, and a larger one (`[99999999999999.999]`)
cannot be added to any date."""

PREFIX_REACH = 200
"""How far into a line a wall-clock prefix is looked for (quoting and alert text come first;
dates inside a message body further on are not the line's time)."""
_MESSAGE_BEGUN = later.compile(r"\[\s*\d+\.\d+\]|\bNVRM:")
"""Where a kernel message has begun (the ring buffer's uptime, the driver's tag): a date after it is the message's
own (the driver banner's build date, `NVRM: loading NVIDIA UNIX x86_64 Kernel Module 570.133.07 Fri Feb 28 22:37:31
UTC 2025`), never the line's time."""


# --- prefixes -----------------------------------------------------------------
_DMESG_T = later.compile(
    r"\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) "
    r"(?P<hms>\d\d:\d\d:\d\d) (?P<year>\d{4})\]"
)
_ISO = later.compile(
    r"(?P<date>\d{4}-\d\d-\d\d)[T ](?P<hms>\d\d:\d\d:\d\d)(?:[.,](?P<frac>\d{1,9}))?"
    r"(?P<tz>Z|[+-]\d\d:?\d\d)?(?P<host>\s+[^\s:\[\]]+(?=\s+kernel:))?"
)
_SYSLOG = later.compile(
    r"(?<![\w:])(?P<mon>[A-Z][a-zäA-Z]{2})\.? +(?P<day>\d{1,2}) (?P<hms>\d\d:\d\d:\d\d)(?:\.\d+)?"
    r"(?P<host>\s+[^\s:\[\]]+(?=\s+kernel:))?"
)
_UPTIME = later.compile(r"\[\s*(?P<up>\d+\.\d+)\]")
_BODY_START = later.compile(r"^\s*(?:kernel:\s*)?(?:\[\s*\d+\.\d+\]\s*)?(?:\[\s*[TC]\d+\]\s*)?")
_WALL_BROADCAST = later.compile(
    r"Message from syslogd@(?P<host>\S+) at (?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) (?P<hms>\d\d:\d\d:\d\d)"
)
_BARE_KERNEL = later.compile(r"^\s*kernel:\s*\[")
_KMSG = later.compile(r"^(?P<prio>\d{1,3}),(?P<seq>\d+),(?P<usec>\d+),[^;]*;")
"""A /dev/kmsg record: `6,3973,227996636,-;message` (priority, sequence, microseconds since boot, flags)."""


@dataclass(frozen=True)
class Stamp:
    """What a line's prefix says: when (wall and/or uptime), on which host, and the message body."""

    body: str
    time: datetime | None = None
    clock: str | None = None
    uptime: float | None = None
    host: str | None = None
    month: int | None = None  # for syslog stamps, to notice a year boundary
    written: str | None = None
    """A year-less stamp as the line writes it (`Dec  2 11:38:47`)."""
    year_from: str | None = None
    """Where the year of a year-less stamp came from, when this input gives one."""
    absurd_uptime: str | None = None
    """An uptime the line gives but no kernel can have (over MAX_UPTIME), ignored: for the diagnostic."""


def _wall(year: int, month: int, day: int, hms: str) -> datetime | None:
    try:
        h, m, s = (int(x) for x in hms.split(":"))
        return datetime(year, month, day, h, m, s)
    except ValueError:
        return None


def _json_stamp(text: str) -> Stamp | None:
    """A journalctl -o json line: MESSAGE plus realtime/monotonic stamps and hostname."""
    start = text.find("{")
    if start < 0 or '"MESSAGE"' not in text:
        return None
    try:
        record = json.loads(text[start:])
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    message = record.get("MESSAGE")
    if isinstance(message, list):  # journald stores non-UTF-8 messages as byte arrays
        try:
            message = bytes(message).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return None
    if not isinstance(message, str):
        return None
    moment = uptime = None
    try:
        moment = datetime.fromtimestamp(int(record["__REALTIME_TIMESTAMP"]) / 1e6, tz=UTC)
    except (KeyError, TypeError, ValueError, OverflowError, OSError):
        pass
    try:
        uptime = int(record["_SOURCE_MONOTONIC_TIMESTAMP"]) / 1e6
    except (KeyError, TypeError, ValueError, OverflowError):
        pass
    if uptime is not None and not 0 <= uptime <= MAX_UPTIME:
        uptime = None
    host = record.get("_HOSTNAME")
    return Stamp(message, moment, "wall" if moment else None, uptime, host if isinstance(host, str) else None)


def stamp(text: str, before: list[Line] | None = None) -> Stamp:
    """Split one line into its prefix facts and the kernel message body."""
    if text.lstrip(" >`").startswith("{"):
        parsed = _json_stamp(text)
        if parsed:
            return parsed
    if m := _KMSG.match(text):
        uptime = int(m["usec"]) / 1e6 if len(m["usec"]) < 20 else None
        return Stamp(text[m.end():], uptime=uptime if uptime is not None and uptime <= MAX_UPTIME else None)
    moment, clock, host, month, written, end = None, None, None, None, None, 0
    if m := _DMESG_T.search(text):
        month = month_number(m["mon"])
        moment = _wall(int(m["year"]), month, int(m["day"]), m["hms"]) if month else None
        clock, end = "wall", m.end()
    elif m := _ISO.search(text, 0, reach := _prefix_reach(text)):
        moment, clock, end = _iso(m), "wall", m.end()
        host = m["host"].strip() if m["host"] else None
    elif (m := _SYSLOG.search(text, 0, reach)) and (month := month_number(m["mon"])):
        written, clock, end = _written(m), YEARLESS, m.end()
        host = m["host"].strip() if m["host"] else None
    elif before and _BARE_KERNEL.search(text):
        for previous in reversed(before):
            if (b := _WALL_BROADCAST.search(previous.text)) and (month := month_number(b["mon"])):
                written, clock, host = _written(b), YEARLESS, b["host"]
                break
    up = _UPTIME.search(text, end)
    uptime = float(up["up"]) if up else None
    absurd = up["up"] if up and uptime is not None and uptime > MAX_UPTIME else None
    rest = text[up.end():] if up else text[end:]
    start = _BODY_START.match(rest)
    assert start is not None  # every part of it is optional: it matches any text
    body = rest[start.end():] if not up else rest.lstrip()
    if moment is None and written is None:
        clock = None
    return Stamp(body, moment, clock, None if absurd else uptime, host, month if clock == YEARLESS else None,
                 written, absurd_uptime=absurd)


def _prefix_reach(text: str) -> int:
    """How far into `text` its wall-clock prefix may lie: PREFIX_REACH, or less where the message has begun."""
    begun = _MESSAGE_BEGUN.search(text, 0, PREFIX_REACH)
    return begun.start() if begun else PREFIX_REACH


def _written(m: regex.Match) -> str | None:
    """The month, day and time of a year-less stamp as written, when they make a date in some year."""
    text = m.string[m.start("mon"):m.end("hms")]
    return text if dated(text, 2000) else None  # 2000 is a leap year: Feb 29 is a date in some year


def _iso(m: regex.Match) -> datetime | None:
    try:
        moment = datetime.fromisoformat(f"{m['date']}T{m['hms']}")
    except ValueError:
        return None
    if m["frac"]:
        moment += timedelta(microseconds=int(m["frac"][:6].ljust(6, "0")))
    if m["tz"]:
        tz = m["tz"].replace(":", "")
        if tz == "Z":
            return moment.replace(tzinfo=UTC)
        offset = timedelta(hours=int(tz[1:3]), minutes=int(tz[3:5]))
        if offset >= timedelta(hours=24):
            return None  # no zone is a day or more from UTC (+99:99): not a time
        return moment.replace(tzinfo=timezone(offset if tz[0] == "+" else -offset))
    return moment


def _settle_clocks(lines: list[Line], stamps: list[Stamp]) -> list[Stamp]:
    """Give no-year stamps the input's year and uptime-only stamps a wall time, per the module docstring."""
    source = next(((line, s.time.year) for line, s in zip(lines, stamps) if s.time and s.clock == "wall"), None)
    if source is None:
        return _place_uptimes(stamps)
    anchor, year = source
    settled, last_month = [], None
    for s in stamps:
        if s.written and s.month:
            if last_month and s.month < last_month - 6:
                year += 1
            last_month = s.month
            if moment := dated(s.written, year):  # Feb 29 of a common year stays year-less
                s = replace(s, time=moment, clock="wall",
                            year_from=f"year {year} from line {anchor.number} (a dated stamp in this input)")
        settled.append(s)
    return _place_uptimes(settled)


def _place_uptimes(stamps: list[Stamp]) -> list[Stamp]:
    """Convert uptime-only stamps using a boot time fixed by a stamp with both clocks (same boot)."""
    boots: list[datetime | None] = []
    boot, previous = None, None
    segment: list[int] = []
    for i, s in enumerate(stamps):
        if s.uptime is not None and previous is not None and s.uptime < previous:
            boots.extend([boot] * len(segment))  # a reboot: earlier anchors no longer apply
            boot, segment = None, []
        if s.uptime is not None:
            previous = s.uptime
        if boot is None and s.uptime is not None and s.time is not None:
            boot = shifted(s.time, -s.uptime)
        segment.append(i)
    boots.extend([boot] * len(segment))
    placed = []
    for s, b in zip(stamps, boots):
        moment = shifted(b, s.uptime) if s.time is None and s.uptime is not None and b is not None else None
        placed.append(replace(s, time=moment, clock="uptime+boot") if moment is not None else s)
    return placed


# --- message bodies -------------------------------------------------------------
_PCI = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
_XID = later.compile(
    r"NVRM: Xid \((?:PCI:[ \t]?)?(?P<pci>[^)\s]{0,64}+)(?: (?P<instance>[^)]{0,64}+))?\):?[ \t]++(?P<xid>\d+)"
    r"(?:,?\s*(?P<rest>.*))?"
)
"""The address and instance in the parentheses are bounded: unbounded, a line of `NVRM: Xid (` copies and no `)` was
scanned to its end from each copy."""
_XID_WHO = later.compile(
    r"^(?:pid=(?P<pid>'?<?[\w./]+>?'?|\d+)(?:,\s*|$))?(?:name=(?P<name>[^,]*)(?:,\s*|$))?(?P<msg>.*)$")
_XID_DETAILS = (
    later.compile(r"Graphics (?P<exception>(?:SM )?(?:Warp |Global )?Exception) on \(GPC "
                  r"(?P<gpc>\d+), TPC (?P<tpc>\d+)(?:, SM (?P<sm_id>\d+))?\): (?P<fault_type>[^,]+)"),
    later.compile(r"Graphics Exception: (?P<exception>ESR)"),
    later.compile(r"MMU Fault: ENGINE (?P<engine>\S+) (?P<client>\S+) faulted @ (?P<fault_address>0x[0-9a-fA-F_]+)\. "
                  r"Fault is of type (?P<fault_type>FAULT_\w+)(?: (?P<access_type>ACCESS_TYPE_\w+))?"),
    later.compile(r"\b[Ll]ink (?P<link>-?\d+)"),
    later.compile(r"GPU recovery action changed from (?P<recovery_from_code>0x\w+) \("
                  r"(?P<recovery_from>[^)]*)\) to (?P<recovery_code>0x\w+) \((?P<recovery_action>[^)]*)\)"),
    later.compile(r"Row Remapp(?:er|ing)(?: Error)?:? (?P<row_remap>.+)"),
    later.compile(r"caused by previous Xid (?P<caused_by_xid>\d+)"),
    later.compile(r"(?:\bCh(?:annel)?(?: ID)? |channel )(?P<channel>(?:0x)?[0-9a-fA-F]{4,})"),
    later.compile(r"errorString (?P<error_string>[^,]+)"),
    later.compile(r"Expected function (?P<gsp_function>\d+ \(\w+\))"),
    later.compile(r"\b(?P<containment>Contained|Uncontained): (?P<unit>[^.]+)"),
    # NVLink5 (Xid 144-150): unit mnemonic, severity, XC/instance, link, then the interrupt-info and
    # error-status words (gpud's kmsg_extended tests and the Xid catalog give the layout)
    later.compile(r"(?<![\w/])(?P<unit>[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*(?:/[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)?)\s+"
                  r"(?P<nvlink_severity>Fatal|Nonfatal|Non-fatal)\s+"
                  r"XC(?P<xc>\d+)\s+i(?P<unit_instance>\d+)\s+Link\s+(?P<link>-?\d+)\s+"
                  r"\((?P<intrinfo>0x[0-9a-fA-F]+)\s+(?P<error_status>0x[0-9a-fA-F]+)"),
    # Xid 74 and others end in a parenthesised list of register words
    later.compile(r"(?P<registers>\((?:0x[0-9a-fA-F]+,\s*){2,}0x[0-9a-fA-F]+\))"),
)
_INT_FIELDS = {"gpc", "tpc", "sm_id", "link", "caused_by_xid", "xc", "unit_instance"}
_HEX_FIELDS = {"intrinfo", "error_status"}
NVLINK5_SUBCODE_SHIFT, NVLINK5_SUBCODE_MASK = 20, 0x3F
"""The sub-code of an NVLink5 Xid sits in bits 20-25 of its interrupt-info word (NVIDIA Xid catalog)."""
_SXID = later.compile(
    r"nvidia-nvswitch(?P<switch>\d+): SXid \(PCI:(?P<pci>[^)]*)\): (?P<sxid>\d+), (?P<msg>.*)"
)
_PCI_LOOSE = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
"""A PCI address as the driver prints it in messages: the domain is sometimes left out (`GPU 18:00.0:`)."""
_OFF_BUS = later.compile(
    r"NVRM: (?:The NVIDIA )?GPU (?:at (?:PCI:)?)?(?P<pci>" + _PCI_LOOSE + r")"
    r"(?::| has|\s*(?:\(PCI ID: (?P<pci_id>[0-9a-fA-F:]+)\)\s*)?"
    r"installed in this system has)\s*(?:GPU )?(?:has )?fallen off the bus"
)
_INIT_FAILED = later.compile(
    r"NVRM: (?:GPU (?P<pci>" + _PCI + r"): )?(?:(?P<stage>RmInitAdapter) failed! \((?P<code>[^)]*)\)"
    r"|(?P<stage>rm_init_adapter) failed(?:,? (?:for )?device (?:bearing )?minor number (?P<minor>\d+))?)"
)
_NVRM = later.compile(
    r"NVRM: (?:GPU ?(?P<gpu_index>\d+) |GPU (?P<pci>" + _PCI_LOOSE + r"): )?"
    r"(?:(?P<function>_?[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*): )?(?P<message>.*)"
)
_NV_STATUS = later.compile(r"\b(?P<name>NV_(?:ERR|WARN)_[A-Z0-9_]+)\b")
_INIT_STATUS = later.compile(r"\(0x[0-9a-fA-F]+:(?P<status>0x[0-9a-fA-F]+):\d+\)")
"""RmInitAdapter's `(0x62:0x65:1697)`: the failing step, the NV_STATUS it returned, the source line."""
_NVRM_START = later.compile(
    r"^(?:Xid |GPU at |loading |GPU ?\d+ |GPU " + _PCI_LOOSE + r": |_?[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*: )")
"""Words that open a new NVRM message (a line that does not open one continues the previous line's)."""
NVRM_LINES = 8
"""Most lines one wrapped NVRM message spans (the unsupported-GPU notice takes 8)."""
_PANIC = later.compile(r"Kernel [Pp]anic - not syncing:?\s*(?P<reason>.*)")
_OOPS = later.compile(
    r"(?P<what>BUG: unable to handle (?:kernel )?(?:\S|\s++(?=\S))*?)(?: at (?P<address>[0-9a-fx]+))?\s*$"
    r"|(?P<what>BUG: kernel NULL pointer dereference), address: (?P<address>[0-9a-fx]+)"
    r"|(?P<what>kernel BUG at [^!\s]+)!?"
    r"|(?P<what>general protection fault)[,:] [0-9a-fx]+(?: \[#\d+\])?"
    r"|(?P<what>Oops)(?:: Oops)?: (?P<code>[0-9a-fA-F]+) \[#\d+\]"
)
_TASK_LINE = later.compile(r"\bCPU: (?P<cpu>\d+) (?:UID: \d+ )?PID: (?P<pid>\d+) Comm: (?P<process>\S+)")
_RIP = later.compile(r"\bRIP: [0-9a-fA-F]{4}:(?:\[<[0-9a-f]+>\] )?"
                     r"(?P<function>[\w.]+)\+0x[0-9a-f]+/0x[0-9a-f]+(?: \[(?P<module>\w+)\])?")
CRASH_LINES = 40
"""Lines around a panic or oops searched for its CPU/PID/Comm and RIP lines."""
_GPU_UUID = later.compile(r"NVRM: GPU at PCI:(?P<pci>[0-9a-fA-F:.]+): (?P<gpu_uuid>GPU-[0-9a-fA-F-]+)")
_SERIAL = later.compile(r"NVRM: GPU Board Serial Number: (?P<serial>\w+)")


def _board_serial(doc: TextDoc, line: Line) -> str | None:
    """The board serial the driver prints on the line after "GPU at PCI:..." (0 when the board has none)."""
    for follower in doc.following(line, 1):
        if (m := _SERIAL.search(follower.text)) and m["serial"].strip("0"):
            return m["serial"]
    return None


_DRIVER = later.compile(r"NVRM: loading NVIDIA UNIX .{0,64}?Kernel Module"  # bounded: no rescan per copy
                        r"(?: for \S+)?\s+(?P<driver_version>\d+\.\d+(?:\.\d+)?)")
_LINUX = later.compile(r"Linux version (?P<kernel_version>\d+\.\d+\S*) \(")
_SEGFAULT = later.compile(
    r"(?:(?:^|\s)(?:traps: )?(?P<process>[^\s\[\]][^\[\]]{0,63}+(?<!\s))\[(?P<pid>\d+)\]:? |^|(?<=\s))"
    r"(?:(?P<fault>segfault) at (?P<address>[0-9a-fA-F]+) ip "
    r"(?P<ip>[0-9a-fA-F]+) sp (?P<sp>[0-9a-fA-F]+) error (?P<error>[0-9a-fA-F]+)"
    r"|(?P<fault>general protection fault|trap invalid opcode) ip:"
    r"(?P<ip>[0-9a-fA-F]+) sp:(?P<sp>[0-9a-fA-F]+) error:(?P<error>[0-9a-fA-F]+))"
    r"(?: in (?P<module>[^\[\s]+)(?:\[(?:(?P<offset>[0-9a-fA-F]+),)?"
    r"(?P<base>[0-9a-fA-F]+)\+(?P<size>[0-9a-fA-F]+)\])?)?"
)
_OOM_KILLED = later.compile(
    r"(?:(?P<scope>Memory cgroup out of memory|Out of memory[^:]*): )?"
    r"(?P<verb>Kill(?:ed)?) process (?P<pid>\d+) \((?P<process>[^)]*)\)"
)
_OOM_TASK_IN = later.compile(r"Task in (?P<memcg>\S+) killed as a result of limit of (?P<limit>\S+)")
"""An old kernel's memory-cgroup OOM report; its "Killed process" line, when printed, follows within a few lines."""
OOM_REPORT_LINES = 40
_OOM_SIZE = later.compile(r"(?P<name>total-vm|anon-rss|file-rss|shmem-rss):(?P<kb>[\d,]+)kB")
_OOM_CONSTRAINT = later.compile(r"oom-kill:(?P<pairs>\S+)")
_OOM_INVOKED = later.compile(r"(?P<process>[^\s:]{1,64}) invoked oom-killer: ")
_OOM_REPORT_BODY = later.compile(r"(?:out_of_memory|oom_kill_process)\+0x|\bMem-Info:|Tasks state \(memory values")
"""The first line of the kernel's OOM report (`python invoked oom-killer: gfp_mask=...`) and the body the kernel writes
under it (the call trace through out_of_memory, Mem-Info, the task table): a paste that stops inside that body,
before the victim's `Killed process` line, still tells the kill (a memory cgroup's, when its
`mem_cgroup_out_of_memory` frame follows). A header followed by other lines is no kill (gpud's own test of an
incomplete sequence)."""
_HANGS = (  # a task name is bounded (the kernel's is 15 characters): each `task ` no longer scans the rest of the line
    ("hung-task",
     later.compile(r"(?:INFO: )?\btask (?P<task>.{1,64}?):(?P<pid>\d+) blocked for more than (?P<seconds>\d+) "
                   r"seconds")),
    ("soft-lockup",
     later.compile(r"BUG: soft lockup - CPU#(?P<cpu>\d+) stuck for (?P<seconds>\d+)s!"
                   r"(?: \[(?P<task>.{1,64}?):(?P<pid>\d+)\])?")),  # a paste may stop before the task
    ("hard-lockup", later.compile(r"Watchdog detected hard LOCKUP on cpu (?P<cpu>\d+)")),
    ("rcu-stall", later.compile(r"(?P<task>(?<!\w)rcu_\w++) (?:self-)?detected (?:expedited )?stalls? on CPUs?"
                                r"(?:/tasks)?:?(?:\s*\{\s*(?P<cpu>\d+)\s*\})?")),
)
_TASK_STATE = later.compile(r"\btask:(?P<task>\S.{0,63}?)\s+state:D\b[^\n]{0,80}?\bpid:\s*(?P<pid>\d+)")
"""The task line the kernel prints above a blocked task's stack (sched_show_task): under a hung-task header, and
for every D-state task of a sysrq-w dump."""
HEADER_REACH = 4
"""Lines above a `task:` line where its hung-task header sits (the header, Tainted, the hung_task_timeout_secs
hint, then the task line)."""
TRACE_LINES = 64
"""Most lines of one task's call trace read (a trace has 10 to 40 frames)."""
_CALL_TRACE = later.compile(r"\bCall Trace:")
_FRAME = later.compile(r"(?:^|\s)(?P<unsure>\?\s+)?(?:\[<[0-9a-f]+>\]\s+)?(?P<function>[A-Za-z_][\w.]*)"
                       r"\+0x[0-9a-fA-F]+/0x[0-9a-fA-F]+(?:\s+\[(?P<module>\w+)\])?")
_TRACE_MARK = later.compile(r"<(?:/?TASK|IRQ|/IRQ|NMI|/NMI)>|\bRIP: |\bR[A-Z0-9]{1,3}: |\bCode: ")
"""Lines inside a trace that are no frame but do not end it."""
GPU_MODULE = later.compile(r"^nvidia(?:_uvm|_modeset|_drm|_peermem|_fs)?$")
GPU_FUNCTION = later.compile(r"^(?:_nv\d{6}rm|nvidia_\w+|uvm_\w+|os_acquire_\w+)$")
"""A frame in the NVIDIA driver: by its module tag, else (traces pasted without tags) by the driver's own
function names (the closed module's `_nvNNNNNNrm` symbols, its OS layer's `os_acquire_*` locks, the `nvidia_*`
entry points and the UVM module's `uvm_*`)."""
MAX_GPU_FRAMES = 16
"""Most driver frames kept on a headless hung-task event (the innermost ones say what it waits on)."""

_AER_HEAD = later.compile(
    r"(?:(?P<device>" + _PCI + r"): )?AER: (?P<multiple>Multiple )?"
    r"(?P<sev>Corrected|Correctable|Uncorrected|Uncorrectable)"
    r"(?: \((?P<fatal>Non-Fatal|Fatal)\))? errors? (?:message )?received(?: from|:)? (?:id=)?(?P<source>[0-9a-fA-F:.]+)"
)
_AER_BUS = later.compile(
    r"(?:(?P<device>" + _PCI + r"): )?(?:AER: )?PCIe Bus Error: "
    r"severity=(?P<sev>[^,]+), type=(?P<layer>[^,]+), \((?P<agent>[^)]*)\)"
)
_AER_BIT = later.compile(r"\[\s*\d+\] (?P<name>[A-Za-z][\w/ ]*?)\s*(?:\(First\))?\s*$")
_MCE_START = later.compile(r"Machine Check Exception|\[Hardware Error\]|(?i:Fatal machine check)")
_MCE_MORE = later.compile(r"\[Hardware Error\]|^\s*(?:Bank \d|PROCESSOR |Machine check|TSC |ADDR |MISC |RIP )"
                          r"|(?i:Fatal machine check)")
_MCE_FIELDS = (
    later.compile(r"CPU (?P<cpu>\d+): Machine Check(?: Exception)?: (?P<mcg>\w+)"),
    later.compile(r"Bank (?P<bank>\d+): (?P<status>[0-9a-fA-F]{16})"),
    later.compile(r"event severity: (?P<event_severity>\w+)"),
    later.compile(r"section_type: (?P<section>[^\n]+)"),
)
_EDAC = later.compile(
    r"EDAC (?:\w+ )?(?P<mc>MC\d+): (?P<count>\d+) (?P<kind>CE|UE) (?P<what>.*?)(?: on (?P<dimm>\S+))?(?: \(|$)"
)


# --- parse ----------------------------------------------------------------------
def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """Kernel events from the candidate lines of one input, identical repeats folded."""
    stamps = _settle_clocks(lines, [stamp(line.text, _before(doc, line)) for line in lines])
    absurd = [(line, s.absurd_uptime) for line, s in zip(lines, stamps) if s.absurd_uptime]
    if absurd:
        doc.diagnostics.append(
            f"{len(absurd)} kernel lines give an uptime of more than "
            f"{MAX_UPTIME / (365 * 86400):.0f} years (first: line "
            f"{absurd[0][0].number}, [{absurd[0][1][:40]}]); no kernel runs that long, so those lines were read "
            "without an uptime")
    by_number = {line.number: s for line, s in zip(lines, stamps)}
    consumed: set[int] = set()
    events: list[Event] = []
    pending_oom: dict[int, tuple[Line, dict]] = {}
    for line, s in zip(lines, stamps):
        if line.number in consumed:
            continue
        try:
            events.extend(_events(doc, line, s, by_number, consumed, pending_oom))
        except (ValueError, IndexError, OverflowError):
            continue  # one odd line never stops the rest
    for first, fields in pending_oom.values():
        events.append(_event(doc, "oom-kill", first, by_number.get(first.number) or stamp(first.text), fields))
    yield from _fold(sorted(events, key=lambda e: e.where.line or 0))


def _before(doc: TextDoc, line: Line) -> list[Line] | None:
    """The lines above a bare ` kernel:[...]` line, where a wall broadcast names time and host."""
    return doc.preceding(line, 2) if _BARE_KERNEL.search(line.text) else None


def _events(doc: TextDoc, line: Line, s: Stamp, stamps: dict[int, Stamp], consumed: set[int],
            pending_oom: dict[int, tuple[Line, dict]]) -> Iterator[Event]:
    body = s.body
    if m := _XID.search(body):
        yield _event(doc, "xid", line, s, _xid_fields(m))
        return
    if m := _SXID.search(body):
        yield _event(doc, "sxid", line, s, _sxid_fields(m))
        return
    if m := _OFF_BUS.search(body):
        yield _event(doc, "gpu-off-bus", line, s, {"pci": m["pci"]})
        return
    if m := _INIT_FAILED.search(body):
        fields = {"pci": m["pci"], "stage": m["stage"], "code": m["code"],
                  "minor": int(m["minor"]) if m["minor"] else None}
        if (m["code"] and (code := _INIT_STATUS.search(f"({m['code']})"))
                and (status := knowledge.nv_status(code["status"]))):
            fields["nv_status"] = status.name
        yield _event(doc, "gpu-init-failed", line, s, fields)
        return
    for pattern in (_GPU_UUID, _DRIVER, _LINUX):
        if m := pattern.search(body):
            fields = {k: v for k, v in m.groupdict().items() if v}
            if pattern is _GPU_UUID and (serial := _board_serial(doc, line)):
                fields["gpu_serial"] = serial
            yield _event(doc, "environment", line, s, fields)
            return
    if _NVRM_TAG.search(body):
        yield from _driver_message(doc, line, s, consumed)
        return
    if m := _SEGFAULT.search(body):
        yield _event(doc, "segfault", line, s, _segfault_fields(m))
        return
    if m := _OOM_CONSTRAINT.search(body):
        fields = _constraint_fields(m["pairs"])
        if fields.get("pid") is not None:
            pending_oom[fields["pid"]] = (line, fields)
        elif not any(_OOM_KILLED.search(f.text) for f in doc.following(line, OOM_REPORT_LINES)):
            yield _event(doc, "oom-kill", line, s, fields)  # a paste cut inside the line: the kill is still told
        return
    if m := _OOM_INVOKED.search(body):
        report = doc.following(line, OOM_REPORT_LINES)
        if (not any(_OOM_KILLED.search(f.text) or _OOM_CONSTRAINT.search(f.text) for f in report)
                and any(_OOM_REPORT_BODY.search(f.text) for f in report)):
            cgroup = any("mem_cgroup_out_of_memory" in f.text for f in report) or None
            yield _event(doc, "oom-kill", line, s, {"process": m["process"], "invoked": True, "cgroup": cgroup})
        return
    if m := _OOM_TASK_IN.search(body):
        if not any(_OOM_KILLED.search(f.text) for f in doc.following(line, OOM_REPORT_LINES)):
            yield _event(doc, "oom-kill", line, s, {"memcg": m["memcg"], "limit": m["limit"], "cgroup": True})
        return
    if m := _OOM_KILLED.search(body):
        if m["verb"] == "Kill":  # an old kernel's choice line: the "Killed process" line after it is the kill
            pid = int(m["pid"])
            fields = {"pid": pid, "process": m["process"],
                      "cgroup": m["scope"].startswith("Memory cgroup") if m["scope"] else None}
            _, earlier = pending_oom.get(pid, (line, {}))
            pending_oom[pid] = (line, {**{k: v for k, v in fields.items() if v is not None}, **earlier})
            return
        yield _oom_event(doc, line, s, m, pending_oom)
        return
    for hang, pattern in _HANGS:
        if m := pattern.search(body):
            yield _event(doc, "kernel-hang", line, s, _hang_fields(hang, m))
            return
    if m := _TASK_STATE.search(body):
        yield from _headless_hang(doc, line, s, m)
        return
    if (m := _AER_HEAD.search(body)) or (m := _AER_BUS.search(body)):
        yield _aer_event(doc, line, s, m, consumed)
        return
    if _MCE_START.search(body):
        yield _mce_event(doc, line, s, consumed)
        return
    if m := _PANIC.search(body):
        yield _crash_event(doc, "kernel-panic", line, s, {"reason": m["reason"].strip()}, consumed)
        return
    if m := _OOPS.search(body):
        yield _crash_event(doc, "kernel-oops", line, s, {"reason": m["what"].strip(), "address": m["address"]},
                           consumed)
        return
    if m := _EDAC.search(body):
        fields = {"mc": m["mc"], "count": int(m["count"]), "corrected": m["kind"] == "CE",
                  "error": m["what"].strip(), "dimm": m["dimm"]}
        yield _event(doc, "edac", line, s, fields)


_NVRM_TAG = later.compile(r"\bNVRM:? ")


def _nvrm_body(text: str) -> str | None:
    """The part after `NVRM: ` of a kernel line, or None when the line is no NVRM line."""
    body = stamp(text).body
    found = _NVRM_TAG.search(body)
    return body[found.end():] if found else None


def _driver_message(doc: TextDoc, line: Line, s: Stamp, consumed: set[int]) -> Iterator[Event]:
    """One NVRM message (joined over the lines the driver wrapped it on), as the event its words call for.

    The driver prints a long message as several `NVRM:` lines; a line that does not open a new message
    (a function name, `GPU<n>`, `Xid`) continues the one before it until a sentence ends.
    """
    first = _nvrm_body(line.text) or ""
    parts, last = [first], line
    if not first.rstrip().endswith((".", "!")):
        for follower in doc.following(line, NVRM_LINES - 1):
            more = _nvrm_body(follower.text)
            if more is None or _NVRM_START.match(more) or not _same_message(s, stamp(follower.text)):
                break
            parts.append(more.strip())
            consumed.add(follower.number)
            last = follower
            if more.rstrip().endswith((".", "!")):
                break
    message = " ".join(p.strip() for p in parts)
    if message.startswith(("version:", "version ")):
        return  # /proc/driver/nvidia/version: read by the bug-report source
    joined = "NVRM: " + message
    end = last if last is not line else None
    if m := _OFF_BUS.search(joined):
        yield _event(doc, "gpu-off-bus", line, s, {"pci": m["pci"], "pci_id": m["pci_id"]}, last=end)
        return
    m = _NVRM.match(joined)
    if m is None:
        return
    family = knowledge.driver_message(m["message"])
    if family is None or family.family == "info":
        return
    subsystem = knowledge.driver_subsystem(m["function"]) if m["function"] else None
    fields: dict[str, Any] = {
        "family": family.family, "function": m["function"], "subsystem": subsystem.name if subsystem else None,
        "gpu_index": int(m["gpu_index"]) if m["gpu_index"] else None, "pci": m["pci"],
        "message": m["message"].strip(), "driver_cause": family.cause or (subsystem.cause if subsystem else None),
    }
    if (status := _NV_STATUS.search(message)) and (known := knowledge.nv_status(status["name"])):
        fields.update(nv_status=known.name, nv_status_message=known.message)
        fields["driver_cause"] = fields["driver_cause"] or known.cause
    yield _event(doc, "driver-message", line, s, fields, last=end)


WRAP_SKEW = timedelta(seconds=1)
"""How far apart a relay (kubectl, a CI runner) may stamp the lines of one wrapped kernel message."""


def _same_message(first: Stamp, other: Stamp) -> bool:
    """A wrapped line carries no stamp of its own, or the stamp of the line it continues.

    The kernel's own uptime must be identical; a wall stamp added on the way may differ a little.
    """
    if other.uptime is not None and other.uptime != first.uptime:
        return False
    if other.time is None or first.time is None or other.time == first.time:
        return True
    try:
        return abs(other.time - first.time) <= WRAP_SKEW
    except TypeError:  # one aware, one naive: not the same relay
        return False


def _crash_event(doc: TextDoc, kind: str, line: Line, s: Stamp, fields: dict[str, Any], consumed: set[int]) -> Event:
    """A kernel panic or oops, with the task (CPU, PID, Comm) and faulting function printed around it.

    Kernels print the `CPU: N PID: N Comm: X` line right after the panic line; syslog relays
    sometimes write the block in reverse, so lines before it are searched too.
    """
    if kind == "kernel-oops":  # one oops prints "BUG: ..." then "Oops: ..."; both are this report
        consumed.update(o.number for o in doc.following(line, CRASH_LINES) if _OOPS.search(stamp(o.text).body))
    return _event(doc, kind, line, s, {**fields, **_task_fields(doc, line)})


def _task_fields(doc: TextDoc, line: Line) -> dict[str, Any]:
    """CPU, PID, Comm of the task a crash report names, and the faulting function and module (RIP)."""
    fields: dict[str, Any] = {}
    for other in [*doc.preceding(line, CRASH_LINES // 4), *doc.following(line, CRASH_LINES)]:
        if (t := _TASK_LINE.search(other.text)) and "cpu" not in fields:
            fields.update(cpu=int(t["cpu"]), pid=int(t["pid"]), process=t["process"])
        if (r := _RIP.search(other.text)) and "function" not in fields:
            fields.update(function=r["function"], module=r["module"])
    return fields


def _event(doc: TextDoc, kind: str, line: Line, s: Stamp, fields: dict, last: Line | None = None) -> Event:
    merged = {k: v for k, v in fields.items() if v is not None}
    if s.uptime is not None:
        merged["uptime"] = s.uptime
    if s.host:
        merged.setdefault("host", s.host)
    if s.written and s.time is None:
        merged["stamp"] = s.written
    if s.year_from:
        merged["joined"] = {"time": s.year_from}
    return doc.event(kind, line, merged, last=last, time=s.time, clock=s.clock)


def _xid_fields(m: regex.Match) -> dict[str, Any]:
    who = _XID_WHO.match(m["rest"] or "")
    pid = who["pid"] if who else None
    name = who["name"].strip() if who and who["name"] else None
    message = (who["msg"] if who else m["rest"] or "").strip()
    fields: dict[str, Any] = {
        "xid": int(m["xid"]),
        "pci": m["pci"] if regex.fullmatch(_PCI + r"|[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?", m["pci"]) else None,
        "gpu_instance": m["instance"],
        "pid": int(pid) if pid and pid.isdigit() else None,
        "process": name if name and "<" not in name else None,
        "message": message,
    }
    if documented := knowledge.xid(fields["xid"]):
        fields["xid_name"] = documented.name
    for pattern in _XID_DETAILS:
        if d := pattern.search(message):
            for key, value in d.groupdict().items():
                if value is not None and key not in fields:
                    fields[key] = _detail_value(key, value)
    if "caused_by_xid" in fields and (root := knowledge.xid(fields["caused_by_xid"])) and root.cause:
        fields["caused_by_cause"] = root.cause  # the Xid a cleanup names: its cause, when the root line is not here
    if "intrinfo" in fields:
        fields["subcode"] = (fields["intrinfo"] >> NVLINK5_SUBCODE_SHIFT) & NVLINK5_SUBCODE_MASK
        fields["fatal"] = fields["nvlink_severity"] == "Fatal"
    return fields


def _detail_value(key: str, value: str) -> Any:
    if key in _INT_FIELDS:
        return int(value)
    if key in _HEX_FIELDS:
        return int(value, 16)
    if key == "registers":
        return [int(word, 16) for word in regex.findall(r"0x[0-9a-fA-F]+", value)]
    return value.strip()


def _sxid_fields(m: regex.Match) -> dict[str, Any]:
    message = m["msg"].strip()
    link = regex.search(r"\bLink (\d+)", message)
    fatal = True if message.startswith("Fatal") else False if message.lower().startswith("non-fatal") else None
    documented = knowledge.sxid(int(m["sxid"]))
    return {"sxid": int(m["sxid"]), "sxid_name": documented.name if documented else None,
            "pci": m["pci"], "switch": int(m["switch"]), "message": message,
            "fatal": fatal, "link": int(link[1]) if link else None}


_PF_ERROR = ((1, "protection violation", "page not present"), (2, "write", "read"), (4, "user", "kernel"))


def _segfault_fields(m: regex.Match) -> dict[str, Any]:
    ip = int(m["ip"], 16)
    fields: dict[str, Any] = {
        "process": m["process"].strip() if m["process"] else None,
        "pid": int(m["pid"]) if m["pid"] else None,
        "fault": m["fault"],
        "address": f"0x{int(m['address'], 16):x}" if m["address"] else None,
        "ip": f"0x{ip:x}",
        "sp": f"0x{int(m['sp'], 16):x}",
        "error_code": int(m["error"], 16),
        "module": m["module"],
    }
    if m["fault"] == "segfault":
        code = fields["error_code"]
        fields["error_text"] = ", ".join(yes if code & bit else no for bit, yes, no in reversed(_PF_ERROR))
        if code & 16:
            fields["error_text"] += ", instruction fetch"
    if m["base"]:
        base = int(m["base"], 16)
        fields["module_base"] = f"0x{base:x}"
        # newer kernels print the offset into the file ("[af2e1a,75b6d2000000+c00000]"),
        # which addr2line wants; older ones only the mapping, so compute it from ip
        offset = int(m["offset"], 16) if m["offset"] else ip - base
        fields["offset"] = f"0x{offset:x}"
    return fields


def _constraint_fields(pairs: str) -> dict[str, Any]:
    values = dict(pair.partition("=")[::2] for pair in pairs.split(",") if "=" in pair)
    pid = values.get("pid", "")
    return {"constraint": values.get("constraint"), "memcg": values.get("task_memcg") or values.get("oom_memcg"),
            "process": values.get("task"), "pid": int(pid) if pid.isdigit() else None,
            "cgroup": values.get("constraint") == "CONSTRAINT_MEMCG" or None}


def _oom_event(doc: TextDoc, line: Line, s: Stamp, m: regex.Match, pending: dict[int, tuple[Line, dict]]) -> Event:
    pid = int(m["pid"])
    sizes = {d["name"].replace("-", "_") + "_kb": int(d["kb"].replace(",", "")) for d in _OOM_SIZE.finditer(s.body)}
    rss = sum(v for k, v in sizes.items() if k.endswith("rss_kb"))
    fields: dict[str, Any] = {"pid": pid, "process": m["process"], **sizes, "rss_kb": rss or None}
    if m["scope"]:
        fields["cgroup"] = m["scope"].startswith("Memory cgroup")
    first = line
    if pid in pending:
        constraint_line, constraint = pending.pop(pid)
        fields = {**{k: v for k, v in constraint.items() if v is not None}, **fields}
        if 0 < line.number - constraint_line.number <= 3:
            first = constraint_line
    return _event(doc, "oom-kill", first, s, fields, last=line if first is not line else None)


def _hang_fields(hang: str, m: regex.Match) -> dict[str, Any]:
    groups = m.groupdict()
    return {
        "hang": hang,
        "task": groups.get("task"),
        "pid": int(groups["pid"]) if groups.get("pid") else None,
        "cpu": int(groups["cpu"]) if groups.get("cpu") else None,
        "seconds": int(groups["seconds"]) if groups.get("seconds") else None,
    }


def _headless_hang(doc: TextDoc, line: Line, s: Stamp, m: regex.Match) -> Iterator[Event]:
    """A blocked task pasted without its `blocked for more than` header: a hung task in the GPU driver when its
    call trace runs through it. Under a header the header's event is the report; a D-state task anywhere else
    (no trace, or a trace outside the driver: sysrq-w lists every task waiting on I/O) is no finding."""
    if any(_HANGS[0][1].search(above.text) for above in doc.preceding(line, HEADER_REACH)):
        return
    frames, last = _call_trace(doc.following(line, TRACE_LINES))
    gpu = [f"{function} [{module}]" if module else function for function, module in frames
           if (module and GPU_MODULE.match(module)) or (not module and GPU_FUNCTION.match(function))]
    if gpu:
        fields = {"hang": "hung-task", "task": m["task"].strip(), "pid": int(m["pid"]), "header": False,
                  "gpu_frames": gpu[:MAX_GPU_FRAMES]}
        yield _event(doc, "kernel-hang", line, s, fields, last=last)


def _call_trace(after: list[Line]) -> tuple[list[tuple[str, str | None]], Line | None]:
    """The reliable frames (function, module) of the call trace that starts right under a task line, and its
    last line; `? ` frames are stale words on the stack, not calls."""
    if not after or not _CALL_TRACE.search(after[0].text):
        return [], None
    frames: list[tuple[str, str | None]] = []
    last = after[0]
    for nxt in after[1:]:
        if "</TASK>" in nxt.text or _TASK_STATE.search(nxt.text):
            break
        if frame := _FRAME.search(nxt.text):
            if not frame["unsure"]:
                frames.append((frame["function"], frame["module"]))
        elif not _TRACE_MARK.search(nxt.text):
            break
        last = nxt
    return frames, last


def _aer_event(doc: TextDoc, line: Line, s: Stamp, m: regex.Match, consumed: set[int]) -> Event:
    """One AER report: the 'error received' head and the bus-error and bit lines that follow it."""
    sev = m["sev"].lower()
    fields: dict[str, Any] = {"device": m["device"], "source": m.groupdict().get("source"),
                              "severity": "corrected" if sev.startswith("correct") else "uncorrected"}
    if m.groupdict().get("fatal"):
        fields["fatal"] = m["fatal"] == "Fatal"
    if m.groupdict().get("layer"):
        fields.update(layer=m["layer"].strip(), agent=m["agent"])
    errors: list[str] = []
    last = line
    for follower in doc.following(line, 10):
        body = stamp(follower.text).body
        if _AER_HEAD.search(body):
            break
        if b := _AER_BUS.search(body):
            if fields.get("layer"):
                break  # the next report
            fields.update(layer=b["layer"].strip(), agent=b["agent"])
            fields["device"] = fields["device"] or b["device"]
            if "fatal" not in fields and "Uncorrect" in b["sev"]:
                fields["fatal"] = "Fatal" in b["sev"] and "Non-Fatal" not in b["sev"]
        elif bit := _AER_BIT.search(body):
            errors.append(bit["name"])
        elif "error status/mask" not in body and "aer_" not in body and "TLP Header" not in body:
            break
        consumed.add(follower.number)
        last = follower
    fields["errors"] = errors
    return _event(doc, "pcie-aer", line, s, fields, last=last if last is not line else None)


def _mce_event(doc: TextDoc, line: Line, s: Stamp, consumed: set[int]) -> Event:
    """A machine-check report: consecutive MCE / [Hardware Error] lines, up to the panic line."""
    block, last = [s.body], line
    for follower in doc.following(line, 12):
        body = stamp(follower.text).body
        if not _MCE_MORE.search(body):
            break
        block.append(body)
        consumed.add(follower.number)
        last = follower
    text = "\n".join(block)
    fields: dict[str, Any] = {}
    for pattern in _MCE_FIELDS:
        if d := pattern.search(text):
            fields.update({k: v for k, v in d.groupdict().items() if v is not None})
    for key in ("cpu", "bank"):
        if key in fields:
            fields[key] = int(fields[key])
    severity = str(fields.get("event_severity", "")).lower()
    fields["fatal"] = (bool(regex.search(r"(?i:Fatal machine check)|context corrupt|not syncing", text))
                       or severity == "fatal")
    if panic := _PANIC.search(text):
        fields["panic"] = panic["reason"].strip()
        fields.update({k: v for k, v in _task_fields(doc, line).items() if k not in fields})
    fields["corrected"] = severity == "corrected" or (not fields["fatal"] and "events logged" in text)
    return _event(doc, "mce", line, s, fields, last=last if last is not line else None)


_HEX = later.compile(r"0x[0-9a-fA-F_]+|\b[0-9a-fA-F]{8,}\b")
_DIGITS = later.compile(r"\d+")
_WHEN = frozenset({"uptime", "stamp"})
"""The fields that say when (an uptime, a year-less stamp): repeats differ in them."""
_VOLATILE = {"xid": _WHEN | {"pid", "channel", "message"},
             "driver-message": _WHEN | {"message", "nv_status", "nv_status_message"}}
"""Fields that may differ between reports folded into one (beyond the time)."""


MAX_FOLDED_PIDS = 64
"""Pids listed on one folded Xid report (fields["pids"]); a storm across more processes says how many more."""


def _fold(events: list[Event]) -> Iterator[Event]:
    """Identical reports become one event with a count.

    Identical means same kind and fields, apart from the uptime; for Xids also
    apart from pid, channel and the hex values in the message (one fault hits
    every channel of a job, ESR registers differ per SM); up to MAX_FOLDED_PIDS
    pids are kept in fields["pids"] (the number of others in "pids_more"), and
    the time of the last repeat in fields["last_time"] (a year-less one's stamp in "last_stamp").
    """
    first: dict[tuple, int] = {}
    out: list[Event] = []
    pids: dict[int, set[int]] = {}
    more: dict[int, int] = {}
    for event in events:
        volatile = _VOLATILE.get(event.kind, _WHEN)
        message = _HEX.sub("#", str(event.fields.get("message", "")))
        if event.kind == "driver-message":  # register dumps and counters: one report, many lines
            message = _DIGITS.sub("#", message)
        key = (event.kind, message,
               tuple(sorted((k, repr(v)) for k, v in event.fields.items() if k not in volatile)))
        if key not in first:
            first[key] = len(out)
            out.append(event)
            continue
        index = first[key]
        kept = out[index]
        if event.kind == "xid" and (pid := event.fields.get("pid")):
            seen = pids.setdefault(index, {p for p in (kept.fields.get("pid"),) if p})
            if pid not in seen and len(seen) >= MAX_FOLDED_PIDS:
                more[index] = more.get(index, 0) + 1
            else:
                seen.add(pid)
        last_time = None
        if event.time is not None and kept.time is not None and event.time.tzinfo == kept.time.tzinfo:
            last_time = max(event.time, kept.fields.get("last_time", kept.time))
        fields = kept.fields if last_time is None else {**kept.fields, "last_time": last_time}
        if "stamp" in event.fields:  # year-less repeats: the last one as written (they come in line order)
            fields = {**fields, "last_stamp": event.fields["stamp"]}
        out[index] = replace(kept, count=kept.count + event.count, fields=fields)
    for index, seen in pids.items():
        if len(seen) > 1:
            extra = {"pids_more": more[index]} if index in more else {}
            out[index] = replace(out[index], fields={**out[index].fields, "pids": sorted(seen), **extra})
    yield from out
