"""Writes lmk_rag/sample/tide_tables.pdf, the PDF of the shipped demo corpus (`lmk-rag ingest
--sample`): a cover page labelled i, then three numbered pages, made by tests/pdf_maker.py.

    python research/scripts/make_sample_pdf.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.pdf_maker import make_pdf  # noqa: E402

PAGES = [
    ["A Beginner's Guide to Tide Tables", "", "Coastal walking notes, second edition"],
    [
        "1. Reading a tide table",
        "A tide table lists the times and heights of high and low water for one port.",
        "Heights are given in metres above chart datum, the lowest level the tide",
        "normally falls to. Times are in local standard time: add one hour in summer.",
        "Between two tides the water rises or falls for about six hours and twelve minutes.",
    ],
    [
        "2. Spring and neap tides",
        "Spring tides come a day or two after a full or new moon, when the sun and the moon",
        "pull in line. They have the highest high waters and the lowest low waters.",
        "Neap tides come after the first and last quarter moon and have the smallest range.",
        "The rule of twelfths: the tide rises 1/12 of its range in the first hour, 2/12 in",
        "the second, 3/12 in the third and fourth, 2/12 in the fifth and 1/12 in the sixth.",
    ],
    [
        "3. Safety on tidal flats",
        "Start back at least two hours before low water ends; the flood tide can cross",
        "flat sand faster than a person walks. Never rely on a table printed for another",
        "port: tide times differ by hours along one coast. Carry a phone in a dry bag and",
        "tell someone when you expect to be back.",
    ],
]

if __name__ == "__main__":
    out = ROOT / "lmk_rag" / "sample" / "tide_tables.pdf"
    out.write_bytes(make_pdf(PAGES, roman_front=1, title="A Beginner's Guide to Tide Tables"))
    print(f"wrote {out}")
