"""A report as a list of blocks, rendered to Markdown (images linked) and to self-contained HTML."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Text:
    text: str  # plain text; `backticks` mark names and values, **stars** emphasis


@dataclass(frozen=True)
class Bullets:
    items: Sequence[str]


@dataclass(frozen=True)
class Table:
    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    caption: str = ""


@dataclass(frozen=True)
class Image:
    path: Path  # a PNG inside the report folder
    alt: str


Block = Heading | Text | Bullets | Table | Image


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        self.blocks.extend(blocks)

    def to_markdown(self, root: Path) -> str:
        """Markdown with images linked relative to `root` (the folder report.md is written to)."""
        parts = [f"# {self.title}"]
        for block in self.blocks:
            parts.append(_markdown(block, root))
        return "\n\n".join(parts) + "\n"

    def to_html(self) -> str:
        """One HTML file that opens offline: styles inline, images as base64 data URIs."""
        body = "\n".join(_html(block) for block in self.blocks)
        return (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(self.title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            f"<h1>{html.escape(self.title)}</h1>\n{body}\n</body>\n</html>\n"
        )


def _markdown(block: Block, root: Path) -> str:
    if isinstance(block, Heading):
        return f"{'#' * block.level} {block.text}"
    if isinstance(block, Text):
        return block.text
    if isinstance(block, Bullets):
        return "\n".join(f"- {item}" for item in block.items)
    if isinstance(block, Table):
        lines = [_markdown_row(block.header), "|" + "|".join("---" for _ in block.header) + "|"]
        lines.extend(_markdown_row(row) for row in block.rows)
        table = "\n".join(lines)
        return f"{table}\n\n*{block.caption}*" if block.caption else table
    return f"![{block.alt}]({block.path.relative_to(root).as_posix()})"


def _markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(str(cell).replace("|", "\\|").replace("\n", " ") for cell in cells) + " |"


def _html(block: Block) -> str:
    if isinstance(block, Heading):
        return f"<h{block.level}>{_inline(block.text)}</h{block.level}>"
    if isinstance(block, Text):
        return f"<p>{_inline(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>\n" + "\n".join(f"<li>{_inline(item)}</li>" for item in block.items) + "\n</ul>"
    if isinstance(block, Table):
        head = "".join(f"<th>{_inline(cell)}</th>" for cell in block.header)
        rows = "\n".join(
            "<tr>" + "".join(f"<td>{_inline(str(cell))}</td>" for cell in row) + "</tr>" for row in block.rows
        )
        caption = f"<caption>{_inline(block.caption)}</caption>" if block.caption else ""
        return f"<table>{caption}\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}\n</tbody>\n</table>"
    data = base64.b64encode(block.path.read_bytes()).decode("ascii")
    return f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(block.alt)}"></figure>'


def _inline(text: str) -> str:
    """The two inline marks the report uses: `code` and **bold**."""
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text, quote=False))
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1000px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; } h3 { margin-top: 1.5em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
caption { caption-side: bottom; text-align: left; font-style: italic; color: #555; padding-top: 0.4em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
code { background: #f3f3f3; padding: 0 0.2em; border-radius: 3px; }
figure { margin: 1em 0; } img { max-width: 100%; height: auto; }
"""
