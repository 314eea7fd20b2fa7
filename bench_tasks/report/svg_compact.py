"""Smaller inline SVG from matplotlib, with nothing visible lost: a report of a short sweep was 3 MB, almost
all of it chart bytes (the rasterized scatter dots alone were two thirds).

- Rasterized layers (the scatter dots) are written by matplotlib as full-colour RGBA PNGs that deflate badly;
  a few dozen colours draw the same picture (a handful of series colours, blended), so they are re-encoded
  as palette PNGs — about a quarter of the size, indistinguishable on screen.
- Coordinates carry six decimals of a point (1/72 inch); one decimal is a tenth of a point, far below a
  screen pixel. Path commands lose the line breaks matplotlib puts around them.
- The few dozen distinct `style="…"` attributes matplotlib repeats on every element become CSS classes named
  by a hash of their content (so a class means the same in every chart of the page).
- matplotlib's own group ids (`xtick_3`, `line2d_12`, …) go; nothing refers to them. The ids the report sets
  (`spectrum-<cell>-e2e-intended`, …) and the ids that are referred to (clip paths, markers) stay.
- Indentation between elements goes.
Pure string functions.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re

from PIL import Image

PALETTE_COLOURS = 32
_PNG = re.compile(r'(xlink:href="data:image/png;base64,)([^"]+)(")')
_GEOMETRY = re.compile(r'(\s(?:d|x|y|width|height|viewBox|transform)=")([^"]*)(")')
_LONG_DECIMAL = re.compile(r"(-?\d+\.\d)\d+")
_AROUND_COMMANDS = re.compile(r"\s*([MLCQZmlcqz])\s*")
_BETWEEN_TAGS = re.compile(r">\s+<")
_STYLE = re.compile(r' style="([^"]*)"')
_AUTO_ID = re.compile(
    r' id="(?:figure|axes|patch|line2d|text|xtick|ytick|matplotlib\.axis|legend|PathCollection|LineCollection|'
    r'PolyCollection|Line2D|image|axesimage|QuadMesh|FillBetweenPolyCollection)_\d+"'
)
_SVG_OPEN = re.compile(r"<svg[^>]*>")


def palette_png(data: bytes, colours: int = PALETTE_COLOURS) -> bytes:
    """The same image with at most `colours` colours (alpha kept), deflated as hard as PNG allows."""
    image = Image.open(io.BytesIO(data))
    image.load()
    if image.mode != "RGBA":
        image = image.convert("RGBA")
    quantized = image.quantize(colors=colours, method=Image.Quantize.FASTOCTREE)
    out = io.BytesIO()
    quantized.save(out, format="PNG", optimize=True)
    return out.getvalue() if len(out.getvalue()) < len(data) else data


def _shrink_png(match: re.Match[str]) -> str:
    data = base64.b64decode(match.group(2))
    return match.group(1) + base64.b64encode(palette_png(data)).decode() + match.group(3)


def _round_geometry(match: re.Match[str]) -> str:
    """Positions to a tenth of a point; path commands without the blanks around them. Matrices keep theirs
    (a rounded matrix could skew what it transforms)."""
    value = match.group(2)
    if "matrix(" in value:
        return match.group(0)
    value = _LONG_DECIMAL.sub(r"\1", value)
    if match.group(1).endswith(' d="'):
        value = _AROUND_COMMANDS.sub(r"\1", value).strip()
    return match.group(1) + value + match.group(3)


def style_class(style: str) -> str:
    return "k" + hashlib.sha1(style.encode()).hexdigest()[:8]


def styles_to_classes(svg: str) -> str:
    """Every `style="…"` as `class="k<hash>"`, with one rule per distinct style at the top of the SVG. A class
    rule outranks matplotlib's own `*{…}` rule just as the style attribute did."""
    styles = dict.fromkeys(_STYLE.findall(svg))
    if not styles:
        return svg
    svg = _STYLE.sub(lambda m: f' class="{style_class(m.group(1))}"', svg)
    rules = "".join(f".{style_class(s)}{{{s}}}" for s in styles)
    opening = _SVG_OPEN.search(svg)
    assert opening is not None
    return svg[: opening.end()] + f"<style>{rules}</style>" + svg[opening.end() :]


def compact_svg(svg: str) -> str:
    """`svg` drawn the same with fewer bytes: palette PNGs, one-decimal geometry, styles as classes, no
    auto ids, no indentation."""
    svg = _PNG.sub(_shrink_png, svg)
    svg = _GEOMETRY.sub(_round_geometry, svg)
    svg = _AUTO_ID.sub("", svg)
    svg = styles_to_classes(svg)
    return _BETWEEN_TAGS.sub("><", svg)
