"""The CSV files a chapter or ``runs --export`` writes hold a missing number (NaN, None) as an
empty cell, never the word ``nan``; an infinity as ``inf``, which ``float`` and pandas read."""

from __future__ import annotations

import csv
import math

import pandas as pd

from rflens.publish.csv_files import write_csv


def test_a_missing_number_is_an_empty_cell_and_reads_back_as_missing(tmp_path):
    df = pd.DataFrame([{"l_ex": 64, "ppl": float("nan"), "erf": None, "label": float("nan"), "r": float("inf")},
                       {"l_ex": 128, "ppl": 12.5, "erf": 3.0, "label": "x", "r": -float("inf")}])
    path = write_csv(df, tmp_path / "t.csv", {"scale": "smoke"})
    text = path.read_text()
    rows = list(csv.reader(line for line in text.splitlines() if not line.startswith("#")))
    cells = [cell for row in rows for cell in row]
    assert not any(cell.strip().lower() == "nan" for cell in cells), text
    assert rows[1] == ["64", "", "", "", "inf"] and rows[2][-1] == "-inf", rows
    back = pd.read_csv(path, comment="#")
    assert math.isnan(back["ppl"][0]) and math.isnan(back["erf"][0]) and back["r"][0] == math.inf
    assert float(rows[2][-1]) == -math.inf
