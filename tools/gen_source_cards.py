#!/usr/bin/env python3
"""Write postmortem/data/source-cards.json: each text source's card (name, input kinds, anchors), read from the
modules themselves, so that the pipeline can hand lines to a source without importing every source first.

usage: python3 tools/gen_source_cards.py [--check]
--check exits 1 when the committed file differs from what would be written (a source's anchors changed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from generated import write_or_check  # noqa: E402
from postmortem.sources import CARDS, card_inputs, card_of, text_sources  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    cards = {"generated_by": "tools/gen_source_cards.py (do not edit)", "inputs": card_inputs(),
             "sources": [card_of(module).to_plain() for module in text_sources()]}
    text = json.dumps(cards, ensure_ascii=False, indent=1) + "\n"
    return write_or_check(ROOT / "postmortem" / "data" / CARDS, text, args.check)


if __name__ == "__main__":
    sys.exit(main())
