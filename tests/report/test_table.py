import math

import pytest

from relin.report.table import MISSING, Table


def test_table_renders_the_same_cells_to_markdown_and_html():
    table = Table(title="T <1>", columns=["model", "acc", "ppl"],
                  rows=[["a|b", 0.12345, None], ["<c>", 1.0, math.nan]], note="n & m")
    md, page = table.markdown(), table.html()
    assert "| a\\|b | 0.123 | – |" in md and "| <c> | 1.000 | – |" in md
    assert "<td>&lt;c&gt;</td><td class=\"num\">1.000</td><td class=\"num\">–</td>" in page, "numbers right-aligned"
    assert "<h3>T &lt;1&gt;</h3>" in page and "n &amp; m" in page and MISSING in md


def test_small_floats_stay_visible():
    assert Table(title="t", columns=["lr"], rows=[[3e-5]]).cells() == [["3.00e-05"]]


def test_row_of_wrong_width_is_rejected():
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        Table(title="t", columns=["a", "b", "c"], rows=[[1, 2]])
