#!/usr/bin/env python3
"""Write signatures/xid-catalog.yaml, and its Simplified Chinese words, from the Xid fact table.

Every documented Xid that names a cause and that no hand-written signature
(signatures/kernel.yaml) covers gets a generated entry: its cause, severity
and recommended action come from the table, its words from this script. The
hand-written entries are the overlay where judgement lives; this file only
makes sure no documented Xid goes unexplained.

The same entries in Simplified Chinese go to signatures/i18n/zh-CN.xid-catalog.yaml:
the sentences are this script's, the Xid names come from the translator's table
signatures/i18n/xid-names.zh-CN.tsv (an Xid missing there, or whose English name
changed, keeps its English name until the table is updated).

usage: python3 tools/gen_xid_catalog.py [--table tests/given/reference/xid.tsv] [--check]
--check exits 1 when a committed file differs from what would be written.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from postmortem.model import Event, Location  # noqa: E402 - the repo's own package, found through ROOT
from postmortem.signatures import Database, load  # noqa: E402

OUTPUT = ROOT / "signatures" / "xid-catalog.yaml"
OUTPUT_ZH = ROOT / "signatures" / "i18n" / "zh-CN.xid-catalog.yaml"
NAMES_ZH = ROOT / "signatures" / "i18n" / "xid-names.zh-CN.tsv"
DEFAULT_TABLE = ROOT / "tests" / "given" / "reference" / "xid.tsv"

ACTIONS = {
    "reset-gpu": "Drain the GPU and reset it (nvidia-smi -r, or reboot) before it runs more work",
    "reboot-node": "Drain the node and reboot it; the GPU cannot recover on its own",
    "restart-app": "Restart the job; if the same Xid returns, look at the application and the driver version",
    "check-hardware": "Check cabling, power and cooling of this GPU",
    "contact-vendor": "Collect nvidia-bug-report.sh output and raise it with the system or GPU vendor",
    "update-driver": "Update the NVIDIA driver to a current release for this GPU",
    "fix-application": "Look for a bug in the application or library that ran on this GPU",
    "none": "No action is needed unless it repeats",
}
ACTIONS_ZH = {
    "reset-gpu": "排空该 GPU 上的作业并复位（nvidia-smi -r 或重启），然后再运行新的工作",
    "reboot-node": "排空节点并重启；GPU 无法自行恢复",
    "restart-app": "重新启动作业；如果同一个 Xid 再次出现，检查应用程序和驱动版本",
    "check-hardware": "检查这块 GPU 的线缆、供电和散热",
    "contact-vendor": "收集 nvidia-bug-report.sh 的输出，提交给系统或 GPU 厂商",
    "update-driver": "把 NVIDIA 驱动更新到适用于这块 GPU 的当前版本",
    "fix-application": "查找在这块 GPU 上运行的应用程序或库中的缺陷",
    "none": "除非反复出现，否则无需处理",
}
COMPARE_ZH = "对比同一 GPU 在这段时间前后的其他 Xid 行：第一个通常才是根本原因"
CONFIDENCE = {"critical": 0.8, "error": 0.7, "warning": 0.55, "info": 0.3}
# A real kernel line (NVIDIA/gpu-operator#1146, Xid 48) with the number and message replaced.
TEMPLATE = ("Dec  2 11:38:47 worker4 kernel: [  219.470994] NVRM: Xid (PCI:0000:07:00): {xid}, pid='<unknown>', "
            "name=<unknown>, {name}")
NEGATIVE_XID = 14  # "injected test error": documented, and no cause


@cache
def hand_written() -> Database:
    """The signature database without the generated catalog."""
    with tempfile.TemporaryDirectory() as folder:
        for path in (ROOT / "signatures").glob("*.yaml"):
            if path.name != OUTPUT.name:
                shutil.copy(path, folder)
        return load(Path(folder))


def covered_by_hand(xid: int) -> bool:
    """Whether a hand-written signature already matches this Xid."""
    event = Event("xid", Location("x", 1), f"Xid {xid}", {"xid": xid, "pci": "0000:07:00", "message": ""})
    return any(s.condition(event) for s in hand_written().signatures)


def quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def entry(row: dict) -> str:
    xid, name, cause, severity = int(row["xid"]), row["name"], row["cause"], row["severity"]
    action = ACTIONS.get(row["action"], ACTIONS["contact-vendor"])
    reference = row["sources"].split(";")[0].split(" ")[0]
    return f"""
  - id: xid-{xid}
    title: {quoted(f"Xid {xid}: {name}")}
    cause: {cause}
    severity: {severity}
    confidence: {CONFIDENCE[severity]}
    match: {{kind: xid, fields: {{xid: [{xid}]}}}}
    explain: >-
      The NVIDIA driver reported Xid {xid} ({name}) for the GPU[[ at {{pci}}]]. NVIDIA's
      catalog files this under {cause}[[; the message was: {{message}}]]
    actions:
      - {quoted(action)}
      - "Compare with other Xid lines of the same GPU around this time: the first one is usually the root"
    references: [{quoted(reference)}]
    examples:
      positive: [{quoted(TEMPLATE.format(xid=xid, name=name))}]
      negative: [{quoted(TEMPLATE.format(xid=NEGATIVE_XID, name="injected test error"))}]
"""


def names_zh() -> dict[int, tuple[str, str]]:
    """Xid -> (English name the translation was made from, Chinese name)."""
    if not NAMES_ZH.exists():
        return {}
    rows = csv.DictReader(NAMES_ZH.open(encoding="utf-8"), delimiter="\t")
    return {int(row["xid"]): (row["name"], row["name_zh-CN"]) for row in rows}


def entry_zh(row: dict, names: dict[int, tuple[str, str]]) -> str:
    """The Chinese words of one generated entry; placeholders as in `entry`."""
    xid, name, cause = int(row["xid"]), row["name"], row["cause"]
    source, translated = names.get(xid, (None, None))
    shown = translated if source == name and translated else name
    action = ACTIONS_ZH.get(row["action"], ACTIONS_ZH["contact-vendor"])
    return f"""
  xid-{xid}:
    title: {quoted(f"Xid {xid}：{shown}")}
    explain: >-
      NVIDIA 驱动报告[[ {{pci}} 上的]] GPU 发生了 Xid {xid}（{shown}）。NVIDIA 的目录把它归为
      {cause}[[；原始信息为：{{message}}]]
    actions:
      - {quoted(action)}
      - {quoted(COMPARE_ZH)}
"""


def rows_to_write(table: Path) -> list[dict]:
    """Documented Xids with a cause that no hand-written signature covers."""
    rows = csv.DictReader(table.open(encoding="utf-8"), delimiter="\t")
    return [row for row in rows if row["cause"] != "-" and not covered_by_hand(int(row["xid"]))]


def render_zh(table: Path) -> str:
    header = (
        "# GENERATED by tools/gen_xid_catalog.py - do not edit: translate Xid names in xid-names.zh-CN.tsv.\n"
        "# Simplified Chinese words of signatures/xid-catalog.yaml (same ids, same placeholders).\n"
        "signatures:\n"
    )
    names = names_zh()
    return header + "".join(entry_zh(row, names) for row in rows_to_write(table))


def render(table: Path) -> str:
    header = (
        "# GENERATED by tools/gen_xid_catalog.py from tests/given/reference/xid.tsv - do not edit.\n"
        "# Documented Xids that name a cause and have no hand-written entry in kernel.yaml.\n"
        "# Examples: a real Xid line (NVIDIA/gpu-operator#1146) with the number and message replaced.\n"
        "signatures:\n"
    )
    return header + "".join(entry(row) for row in rows_to_write(table))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    outputs = {OUTPUT: render(args.table), OUTPUT_ZH: render_zh(args.table)}
    if args.check:
        stale = [path for path, text in outputs.items() if not path.exists()
                 or path.read_text(encoding="utf-8") != text]
        for path in stale:
            print(f"{path} is stale: run tools/gen_xid_catalog.py")
        print("up to date" if not stale else "")
        return 1 if stale else 0
    for path, text in outputs.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
