"""Write a realistic crash archive: thousands of cases made from the real logs in samples/ and tests/data.

Each case is a directory (a few as .tar.gz) holding one real crash's files,
varied the way a fleet varies them: the host name and GPU PCI address in
syslog lines, the GPU UUID, lines of ordinary noise (systemd, training
progress) before and after the evidence, and the files' modification time
spread over two months. The noise holds no anchor of any postmortem source,
so every copy of a template keeps the template's verdict; `expected` says
which template each case came from.

    python3 benchmarks/make_archive.py OUT_DIR [--cases 5000] [--seed 7]
"""

from __future__ import annotations

import argparse
import io
import os
import random
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TEMPLATES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ecc-then-illegal-address",
     ("samples/ecc-then-illegal-address/kern.log", "samples/ecc-then-illegal-address/worker.log")),
    ("gpu-off-bus", ("samples/gpu-off-bus/dmesg.txt", "samples/gpu-off-bus/nvidia-smi.txt")),
    ("rtx5090-sm120", ("samples/rtx5090-sm120/train.log",)),
    ("xid79-flr", ("tests/data/kernel_log/xid79-154-pf-flr-02.dmesg.txt",)),
    ("xid13-vllm", ("tests/data/kernel_log/xid13-graphics-exc-vllm-02.dmesg.txt",)),
    ("oom-framepack", ("tests/data/framework_log/oom-framepack-04.log",)),
    ("segv-ethminer", ("tests/data/framework_log/backtrace-segv-libcuda-ethminer-01.log",)),
    ("nccl-timeout", ("tests/data/nccl_log/timeout-ofa.log",)),
    ("host-oom", ("tests/data/kernel_log/cgroup-oomkill-dataloader-01.dmesg.txt",)),
    ("shm", ("tests/data/framework_log/shm-bus-error-mmf-02.log",)),
    ("device-assert", ("tests/data/framework_log/device-assert-spatial-nll-04.log",)),
    ("coredump-abort", ("tests/data/debugger_log/coredump-stack.txt",)),
    ("noise-only", ()),
)
"""Case shapes: a name and the real files (repository paths) one case of that shape holds."""

NOISE = (
    "{stamp} {host} systemd[1]: Started Session {n} of user root.",
    "{stamp} {host} systemd-logind[812]: New session {n} of user slurm.",
    "{stamp} {host} CRON[{n}]: (root) CMD (/usr/local/bin/collect-metrics)",
    "{stamp} {host} sshd[{n}]: Accepted publickey for ops from 10.1.{a}.{b} port 5{n} ssh2",
    "epoch {a} step {n} loss {loss:.4f} lr 3.0e-04 tokens/s {b}12",
    "[rank{a}] iteration {n}/100000 | consumed samples: {n}00 | elapsed time per iteration (ms): {b}4.2",
)
"""Ordinary lines of a fleet's logs: they carry no anchor, so they change no verdict."""

HOSTS = tuple(f"node{i:03d}" for i in range(48))


def make_archive(out: Path, cases: int, seed: int = 7, tarballs: float = 0.05) -> dict[str, str]:
    """Write `cases` cases under `out`; returns case name -> template name."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    texts = {path: (ROOT / path).read_text(encoding="utf-8", errors="replace") for _, files in TEMPLATES
             for path in files}
    expected = {}
    start = 1_735_689_600  # 2025-01-01, so case times spread over Jan-Feb 2025
    for i in range(cases):
        template, files = TEMPLATES[i % len(TEMPLATES)]
        name = f"case-{i:05d}"
        host = rng.choice(HOSTS)
        members = {Path(p).name: _vary(texts[p], host, rng) for p in files} or {"job.log": ""}
        members = {member: _noisy(text, host, rng) for member, text in members.items()}
        moment = start + rng.randrange(60 * 86400)
        if rng.random() < tarballs:
            name += ".tar.gz"
            _write_tarball(out / name, members, moment)
        else:
            folder = out / name
            folder.mkdir(exist_ok=True)
            for member, text in members.items():
                (folder / member).write_text(text, encoding="utf-8")
                os.utime(folder / member, (moment, moment))
        expected[name] = template
    return expected


def _vary(text: str, host: str, rng: random.Random) -> str:
    """The host name and GPU UUID changed the way another machine would print them."""
    for known in ("worker4", "bubz"):
        text = text.replace(f" {known} ", f" {host} ")
    if "GPU-5f7a9ad6" in text:
        text = text.replace("GPU-5f7a9ad6", f"GPU-{rng.randrange(16**8):08x}")
    return text


def _noisy(text: str, host: str, rng: random.Random) -> str:
    """Noise lines before and after the real text (never inside it: a traceback stays whole)."""
    def lines(count: int) -> list[str]:
        return [rng.choice(NOISE).format(stamp=f"Jan {rng.randrange(1, 28):2d} "
                                               f"0{rng.randrange(10)}:1{rng.randrange(10)}:0{rng.randrange(10)}",
                                         host=host, n=rng.randrange(100, 99999), a=rng.randrange(8),
                                         b=rng.randrange(10, 99),
                                         loss=rng.random() * 4) for _ in range(count)]

    before, after = lines(rng.randrange(0, 40)), lines(rng.randrange(0, 20))
    body = text if text.endswith("\n") or not text else text + "\n"
    return "\n".join(before) + ("\n" if before else "") + body + "\n".join(after) + ("\n" if after else "")


def _write_tarball(path: Path, members: dict[str, str], moment: int) -> None:
    with tarfile.open(path, "w:gz") as archive:
        for member, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(member)
            info.size, info.mtime = len(data), moment
            archive.addfile(info, io.BytesIO(data))
    os.utime(path, (moment, moment))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    make_archive(args.out, args.cases, args.seed)
    print(f"wrote {args.cases} cases under {args.out}")


if __name__ == "__main__":
    main()
