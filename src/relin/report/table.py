"""A small table rendered to Markdown and HTML alike, so both pages show the same numbers."""
from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from typing import Any

MISSING = "–"
# A cell that is one number (with a unit and its interval, e.g. "0.95 [0.90, 0.99]" or "27%"): right-aligned in HTML.
NUMBER = re.compile(r"^[-+]?\d[\d.,e+-]*%?( \[[-+]?\d[\d.,e+-]*, [-+]?\d[\d.,e+-]*\])?$|^–$")


def format_cell(value: Any, digits: int, spec: str | None = None) -> str:
    """Floats with format ``spec``, else ``digits`` decimals (scientific when smaller); missing or
    NaN values as a dash; anything else as ``str``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, float):
        if spec is not None:
            return format(value, spec)
        return f"{value:.2e}" if 0 < abs(value) < 10 ** -digits else f"{value:.{digits}f}"
    return str(value)


@dataclass
class Table:
    """``rows`` of cells under ``columns``; ``note`` is a one-line caption under the table.

    Floats show ``digits`` decimals unless ``formats`` gives their column a format spec (``".2e"``). A
    ``collapsed`` table (a long detail) renders folded under its title.
    """

    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    note: str = ""
    digits: int = 3
    formats: dict[str, str] = field(default_factory=dict)
    collapsed: bool = False

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"table {self.title!r}: row {row!r} has {len(row)} cells for "
                                 f"{len(self.columns)} columns")

    def cells(self) -> list[list[str]]:
        specs = [self.formats.get(c) for c in self.columns]
        return [[format_cell(v, self.digits, spec) for v, spec in zip(row, specs)] for row in self.rows]

    def markdown(self) -> str:
        def line(cells: list[str]) -> str:
            return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

        table = [line(self.columns), line(["---"] * len(self.columns)), *(line(row) for row in self.cells())]
        note = ["", f"*{self.note}*"] if self.note else []
        if self.collapsed:
            return "\n".join([f"<details><summary>{html.escape(self.title)}</summary>", "", *table, *note, "",
                              "</details>"]) + "\n"
        return "\n".join([f"### {self.title}", "", *table, *note]) + "\n"

    def html(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td class=\"num\">{html.escape(c)}</td>" if NUMBER.match(c)
                                        else f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                       for row in self.cells())
        note = f"<p class=\"note\">{html.escape(self.note)}</p>" if self.note else ""
        table = (f"<div class=\"scroll\"><table>\n<thead><tr>{head}</tr></thead>\n<tbody>{body}</tbody>\n</table>"
                 f"</div>\n{note}\n")
        if self.collapsed:
            return f"<details><summary>{html.escape(self.title)}</summary>\n{table}</details>\n"
        return f"<h3>{html.escape(self.title)}</h3>\n{table}"
