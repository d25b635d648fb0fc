"""A tiny document model the portfolio writes once and renders twice: Markdown and a
self-contained HTML page (plots embedded as base64 PNG). Cells and paragraphs are text
or ``Link``s; everything is escaped for the format it lands in."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Link:
    text: str
    href: str


@dataclass(frozen=True)
class Badge:
    """A status word shown in colour in HTML and in bold in Markdown."""
    text: str


BADGE_COLOURS = {"met": "#2e7d32", "passed": "#2e7d32", "partly": "#b26a00",
                 "failing": "#c62828", "not yet": "#616161", "not run": "#616161",
                 "not started": "#616161", "FAILED": "#c62828", "KILLED": "#c62828",
                 "FINISHED": "#2e7d32", "RUNNING": "#1565c0", "corrupt": "#c62828"}


class Doc:
    def __init__(self, title: str):
        self.title = title
        self.blocks: list[tuple] = []

    def heading(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def para(self, *parts) -> None:
        self.blocks.append(("p", parts))

    def note(self, *parts) -> None:
        self.blocks.append(("note", parts))

    def bullets(self, items: list) -> None:
        if items:
            self.blocks.append(("ul", items))

    def table(self, headers: list[str], rows: list[list]) -> None:
        self.blocks.append(("table", headers, rows))

    def image(self, path: Path | None, alt: str) -> None:
        if path is not None:
            self.blocks.append(("img", Path(path), alt))

    # -- Markdown ------------------------------------------------------------------
    def markdown(self, out_dir: Path) -> str:
        lines = [f"# {self.title}", ""]
        for block in self.blocks:
            kind = block[0]
            if kind == "h":
                lines += [f"{'#' * (block[1] + 1)} {block[2]}", ""]
            elif kind == "p":
                lines += [_md_inline(block[1]), ""]
            elif kind == "note":
                lines += ["> " + _md_inline(block[1]).replace("\n", "\n> "), ""]
            elif kind == "ul":
                lines += [f"- {_md_inline(_parts(item))}" for item in block[1]] + [""]
            elif kind == "table":
                headers, rows = block[1], block[2]
                lines.append("| " + " | ".join(_md_cell(h) for h in headers) + " |")
                lines.append("|" + "---|" * len(headers))
                for row in rows:
                    lines.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
                lines.append("")
            elif kind == "img":
                rel = _relative(block[1], out_dir)
                lines += [f"![{block[2]}]({rel})", ""]
        return "\n".join(lines)

    # -- HTML ----------------------------------------------------------------------
    def html(self) -> str:
        body = [f"<h1>{html.escape(self.title)}</h1>"]
        for block in self.blocks:
            kind = block[0]
            if kind == "h":
                level = min(block[1] + 1, 6)
                anchor = _anchor(block[2])
                body.append(f'<h{level} id="{anchor}">{html.escape(block[2])}</h{level}>')
            elif kind == "p":
                body.append(f"<p>{_html_inline(block[1])}</p>")
            elif kind == "note":
                body.append(f'<div class="note">{_html_inline(block[1])}</div>')
            elif kind == "ul":
                items = "".join(f"<li>{_html_inline(_parts(i))}</li>" for i in block[1])
                body.append(f"<ul>{items}</ul>")
            elif kind == "table":
                head = "".join(f"<th>{html.escape(h)}</th>" for h in block[1])
                rows = "".join("<tr>" + "".join(f"<td>{_html_inline(_parts(c))}</td>"
                                                 for c in row) + "</tr>" for row in block[2])
                body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody>"
                            "</table>")
            elif kind == "img":
                data = base64.b64encode(block[1].read_bytes()).decode()
                body.append(f'<figure><img alt="{html.escape(block[2])}" '
                            f'src="data:image/png;base64,{data}"><figcaption>'
                            f"{html.escape(block[2])}</figcaption></figure>")
        return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{html.escape(self.title)}</title><style>{CSS}</style></head>"
                f"<body>{''.join(body)}</body></html>\n")


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;line-height:1.45;color:#212121}
table{border-collapse:collapse;margin:0.6em 0 1.2em;font-size:0.9em}
th,td{border:1px solid #cfd8dc;padding:4px 8px;vertical-align:top;text-align:left}
th{background:#eceff1}
.note{border-left:4px solid #f9a825;background:#fff8e1;padding:0.6em 1em;margin:1em 0}
.badge{color:white;border-radius:3px;padding:0 6px;font-weight:600;white-space:nowrap}
figure{margin:1em 0}figure img{max-width:100%}figcaption{font-size:0.85em;color:#546e7a}
code{background:#f5f5f5;padding:0 3px}
"""


def _parts(item) -> tuple:
    if isinstance(item, (list, tuple)):
        return tuple(item)
    return (item,)


def _relative(path: Path, base: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path(base).resolve()))
    except ValueError:
        return Path(path).resolve().as_uri()


def _anchor(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def _md_text(text: str) -> str:
    return str(text).replace("<", "&lt;").replace(">", "&gt;")


def _md_part(part) -> str:
    if isinstance(part, Link):
        return f"[{_md_text(part.text)}]({part.href.replace(' ', '%20')})"
    if isinstance(part, Badge):
        return f"**{_md_text(part.text)}**"
    return _md_text(part)


def _md_inline(parts) -> str:
    return "".join(_md_part(p) for p in parts)


def _md_cell(cell) -> str:
    return _md_inline(_parts(cell)).replace("|", "\\|").replace("\n", "<br>")


def _html_part(part) -> str:
    if isinstance(part, Link):
        return f'<a href="{html.escape(part.href, quote=True)}">{html.escape(part.text)}</a>'
    if isinstance(part, Badge):
        colour = BADGE_COLOURS.get(part.text, "#455a64")
        return f'<span class="badge" style="background:{colour}">{html.escape(part.text)}</span>'
    return html.escape(str(part)).replace("\n", "<br>")


def _html_inline(parts) -> str:
    return "".join(_html_part(p) for p in parts)
