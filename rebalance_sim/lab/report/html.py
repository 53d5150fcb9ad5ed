"""A self-contained HTML report: figures embedded as base64 PNGs, tables inline, no external files
needed to read it (the PNGs and CSVs are also written beside it for reuse)."""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from pathlib import Path

import attrs
import pandas as pd

from ..atomic import atomic_write_text


@attrs.frozen
class Figure:
    path: Path  # the PNG beside the report
    caption: str  # one line


@attrs.frozen
class Table:
    title: str
    frame: pd.DataFrame
    csv: str = ""  # file name of the full table beside the report, if any
    note: str = ""


_CSS = """
body { font-family: -apple-system, Segoe UI, Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1200px; color: #222; line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.92em; color: #444; margin-top: 0.3em; }
.table-wrap { max-width: 100%; overflow-x: auto; }   /* wide tables scroll, the page does not */
table { border-collapse: collapse; font-size: 0.85em; margin: 0.8em 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f5f5f5; } td.text, th.text { text-align: left; }
.meta { color: #555; font-size: 0.9em; } code { background: #f4f4f4; padding: 0 3px; }
"""


def _cell(v) -> tuple[str, bool]:
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return "–", False  # noqa: RUF001 (a typographic dash marks a missing value)
    if isinstance(v, bool):
        return ("yes" if v else "no"), True
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}", False
        return f"{v:.3g}" if abs(v) < 0.01 and v != 0 else f"{v:,.2f}", False
    if isinstance(v, int):
        return f"{v:,}", False
    return html.escape(str(v)), True


def table_html(frame: pd.DataFrame) -> str:
    head = "".join(
        f'<th class="text">{html.escape(str(c))}</th>'
        if frame[c].dtype == object
        else f"<th>{html.escape(str(c))}</th>"
        for c in frame.columns
    )
    rows = []
    for rec in frame.itertuples(index=False):
        cells = []
        for v in rec:
            text, is_text = _cell(v.item() if hasattr(v, "item") else v)
            cells.append(f'<td class="text">{text}</td>' if is_text else f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def figure_html(fig: Figure) -> str:
    data = base64.b64encode(Path(fig.path).read_bytes()).decode("ascii")
    name = html.escape(Path(fig.path).name)
    return (
        f'<figure><img alt="{name}" data-file="{name}" src="data:image/png;base64,{data}">'
        f'<figcaption>{html.escape(fig.caption)} <span class="meta">({name})</span>'
        "</figcaption></figure>"
    )


def write_report(
    path: Path,
    title: str,
    intro: Sequence[str],
    sections: Sequence[tuple[str, Sequence]],
    meta: Sequence[str] = (),
) -> Path:
    """Write ``path`` (report.html): ``sections`` are (heading, [Figure | Table | str]) pairs."""
    parts = [
        f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>"
    ]
    parts += [f"<p>{html.escape(p)}</p>" for p in intro]
    for heading, items in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        for item in items:
            if isinstance(item, Figure):
                parts.append(figure_html(item))
            elif isinstance(item, Table):
                parts.append(f"<h3>{html.escape(item.title)}</h3>")
                if item.note:
                    parts.append(f'<p class="meta">{html.escape(item.note)}</p>')
                parts.append(table_html(item.frame))
                if item.csv:
                    name = html.escape(item.csv)
                    parts.append(
                        f'<p class="meta">Full table: <a href="{name}"><code>{name}</code></a></p>'
                    )
            else:
                parts.append(f"<p>{html.escape(str(item))}</p>")
    if meta:
        parts.append('<h2>How this was produced</h2><ul class="meta">')
        parts += [f"<li>{html.escape(m)}</li>" for m in meta]
        parts.append("</ul>")
    parts.append("</body></html>")
    atomic_write_text(Path(path), "\n".join(parts))
    return Path(path)


def referenced_files(report: Path) -> list[str]:
    """The figure file names a report refers to (its ``data-file`` attributes)."""
    import re

    return re.findall(r'data-file="([^"]+)"', Path(report).read_text(encoding="utf-8"))
