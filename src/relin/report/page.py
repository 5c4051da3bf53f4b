"""Sections of tables and figures rendered to ``index.html`` (figures embedded as PNG files beside
it) and ``summary.md`` (the same tables in Markdown, figures linked).

Both pages are a function of their inputs only (no timestamp), so an unchanged pipeline rebuilds
byte-identical pages."""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from .table import Table

# Cells wrap between words only (a narrow column never splits a word: the table takes the width its longest word
# needs, and scrolls sideways when the page has none left).
STYLE = """
body { font-family: system-ui, sans-serif; max-width: 84rem; margin: 2rem auto; padding: 0 1rem; color: #222;
       line-height: 1.4; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5rem 0; font-variant-numeric: tabular-nums; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: left; vertical-align: top;
         max-width: 32rem; overflow-wrap: break-word; word-break: normal; hyphens: manual; }
td.num { text-align: right; white-space: nowrap; }
th { white-space: nowrap; }
nav.contents ol { margin: 0.25rem 0 1rem; padding-left: 1.5rem; }
thead { background: #f3f3f3; }
.note, .sources { color: #666; font-size: 0.9rem; }
.warning { background: #fff3cd; border: 1px solid #e0c36c; padding: 0.4rem 0.7rem; font-weight: 600; }
details { margin: 0.5rem 0; } summary { cursor: pointer; font-weight: 600; }
figure { margin: 1rem 0; } figure img { max-width: 100%; }
"""


@dataclass(frozen=True)
class FigureRef:
    """A PNG in the report directory (``file`` relative to it) and its caption."""

    file: str
    caption: str


@dataclass(frozen=True)
class Notice:
    """A line under the report's title; a ``warning`` stands out (e.g. verdicts that are not evidence)."""

    text: str
    warning: bool = False


@dataclass
class Section:
    heading: str
    blocks: list[Table | FigureRef] = field(default_factory=list)


def anchor(heading: str) -> str:
    """The id of a section's heading as GitHub names a Markdown heading (lower-case, punctuation but "-" dropped,
    each space a "-"), so the contents' links work in both pages."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def render_html(title: str, sections: list[Section], sources: list[str], head: list[Notice] = ()) -> str:
    """The page; ``head`` holds the lines under the title (what produced the report, warnings), then the contents."""
    contents = "".join(f"<li><a href=\"#{anchor(s.heading)}\">{html.escape(s.heading)}</a></li>"
                       for s in [*sections, Section("Sources")])
    parts = [f"<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
             f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
             f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
             f"<h1>{html.escape(title)}</h1>\n",
             *(f"<p class=\"{'warning' if n.warning else 'note'}\">{html.escape(n.text)}</p>\n" for n in head),
             "<p class=\"note\">Built from the stage outputs listed under Sources.</p>\n",
             f"<nav class=\"contents\"><ol>{contents}</ol></nav>\n"]
    for section in sections:
        parts.append(f"<h2 id=\"{anchor(section.heading)}\">{html.escape(section.heading)}</h2>\n")
        for block in section.blocks:
            if isinstance(block, Table):
                parts.append(block.html())
            else:
                parts.append(f"<figure><img src=\"{html.escape(block.file)}\" alt=\"{html.escape(block.caption)}\">"
                             f"<figcaption>{html.escape(block.caption)}</figcaption></figure>\n")
    items = "".join(f"<li><code>{html.escape(s)}</code></li>" for s in sources)
    # the inputs are for looking up, not for reading through: folded, as the long detail tables are
    parts.append(f"<h2 id=\"sources\">Sources</h2>\n<details><summary>{len(sources)} stage outputs</summary>\n"
                 f"<ul class=\"sources\">{items}</ul></details>\n</body>\n</html>\n")
    return "".join(parts)


def render_markdown(title: str, sections: list[Section], sources: list[str], head: list[Notice] = ()) -> str:
    lines = "".join(f"{f'**{n.text}**' if n.warning else n.text}\n\n" for n in head)
    contents = "".join(f"{i}. [{s.heading}](#{anchor(s.heading)})\n"
                       for i, s in enumerate([*sections, Section("Sources")], 1))
    parts = [f"# {title}\n\n{lines}Built from the stage outputs listed under Sources.\n\n{contents}"]
    for section in sections:
        parts.append(f"\n## {section.heading}\n")
        for block in section.blocks:
            parts.append("\n" + (block.markdown() if isinstance(block, Table)
                                 else f"![{block.caption}]({block.file})\n"))
    parts.append(f"\n## Sources\n\n<details><summary>{len(sources)} stage outputs</summary>\n\n"
                 + "".join(f"- `{s}`\n" for s in sources) + "\n</details>\n")
    return "".join(parts)
