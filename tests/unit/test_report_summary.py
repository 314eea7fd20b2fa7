"""The report summarizes (issue 21): pipeline tables as heads with their files linked, chart labels that never
overlap, and charts compacted without visible loss."""

from __future__ import annotations

import base64
import io
import itertools
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text
from PIL import Image

from bench_tasks.report import page
from bench_tasks.report.build import tables_folder_name, write_tables
from bench_tasks.report.charts import CYCLE, Curve, spectrum_chart, spectrum_figure
from bench_tasks.report.data import GATE_PASSED, RunData
from bench_tasks.report.labels import spread, stack_rows
from bench_tasks.report.spectrum import spectrum
from bench_tasks.report.svg_compact import compact_svg, palette_png, styles_to_classes
from bench_tasks.report.tables_view import HEAD_ROWS, constant_columns, pipeline_section, value_text


def test_spread_keeps_order_and_gap() -> None:
    assert spread([0.5, 0.1, 0.9], 0.1) == [0.5, 0.1, 0.9]  # far apart: untouched
    assert spread([0.50, 0.51, 0.52], 0.1) == pytest.approx([0.50, 0.60, 0.70])
    assert spread([0.95, 0.96, 0.97], 0.1, 0.0, 1.0) == pytest.approx([0.8, 0.9, 1.0])  # pushed down from the top
    assert spread([], 0.1) == []


def test_spread_never_leaves_less_than_the_gap() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        wanted = list(rng.uniform(0, 1, rng.integers(1, 9)))
        placed = sorted(spread(wanted, 0.075, 0.02, 0.98))
        assert all(b - a >= 0.075 - 1e-12 for a, b in itertools.pairwise(placed))
        assert placed[0] >= 0.02 - 1e-12


def _overlap(a: object, b: object) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1  # type: ignore[attr-defined]


def test_max_labels_of_an_overlay_never_overlap() -> None:
    """Seven cells with the quick sweep's maxima (two pairs within a few per cent): labels placed beside their
    markers collided here; now each has its own line in a column, and none covers another or the legend."""
    rng = np.random.default_rng(5)
    curves = []
    for i, max_ms in enumerate((103, 47, 39.2, 16.1, 12.6, 40.0, 41.2)):
        values = rng.lognormal(np.log(1e6), 1.0, 10_000).astype(np.int64)
        values[-1] = int(max_ms * 1e6)
        curves.append(Curve(f"cell {i}", f"overlay-e2e-{i}", spectrum(values), CYCLE[i]))
    fig = spectrum_figure("e2e", curves)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    ax = fig.axes[0]
    labels = [t for t in ax.texts if t.get_text().startswith("max ")]
    assert len(labels) == 7
    boxes = [Text.get_window_extent(t, renderer) for t in labels]  # the text itself, not its leader line
    for a, b in itertools.combinations(boxes, 2):
        assert not _overlap(a, b)
    legend = ax.get_legend().get_window_extent(renderer)
    assert not any(_overlap(box, legend) for box in boxes)
    svg = spectrum_chart("e2e", curves)
    assert all(f'id="overlay-e2e-{i}-max-label"' in svg for i in range(7))


def test_palette_png_keeps_the_picture() -> None:
    rng = np.random.default_rng(1)
    rgba = np.zeros((60, 80, 4), dtype=np.uint8)
    dots = rng.integers(0, 60 * 80, 900)
    rgba.reshape(-1, 4)[dots] = (192, 57, 43, 140)  # translucent red dots, as the scatter draws them
    buf = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(buf, format="PNG")
    small = palette_png(buf.getvalue())
    again = np.asarray(Image.open(io.BytesIO(small)).convert("RGBA"))
    assert len(small) <= len(buf.getvalue())
    assert np.array_equal(again[..., 3] > 0, rgba[..., 3] > 0)  # every dot still there, nothing added
    assert np.abs(again.astype(int) - rgba.astype(int)).max() <= 8


def test_styles_become_classes_with_one_rule_each() -> None:
    svg = (
        '<svg width="1pt"><path style="fill: red"/><path style="fill: red"/><text style="font-size: 9px">a</text></svg>'
    )
    out = styles_to_classes(svg)
    assert "style=" not in out.replace("<style>", "")
    classes = re.findall(r'class="(k[0-9a-f]{8})"', out)
    assert len(classes) == 3 and len(set(classes)) == 2
    assert out.count("{fill: red}") == 1


def test_compact_svg_keeps_report_ids_and_drops_matplotlibs() -> None:
    svg = (
        '<svg viewBox="0 0 573.053516 290.455016">\n  <g id="xtick_3">\n   <path d="M 41.513516 254.254313 \n'
        'L 41.513516 21.454313 \n" style="stroke: #000"/>\n  </g>\n  <g id="spectrum-abc-e2e-intended">'
        '<use xlink:href="#m1" x="57.612345" y="12.5"/></g></svg>'
    )
    out = compact_svg(svg)
    assert 'id="xtick_3"' not in out and 'id="spectrum-abc-e2e-intended"' in out
    assert 'd="M41.5 254.2L41.5 21.4"' in out and 'x="57.6"' in out and 'viewBox="0 0 573.0 290.4"' in out
    assert "\n" not in out


def test_value_text_never_prints_exponents() -> None:
    assert value_text(1246970.0) == "1,246,970" and value_text(1246970) == "1,246,970"
    assert value_text(0.000123) == "0.000123" and value_text(None) == "" and value_text(["99.9"]) == '["99.9"]'


def test_constant_columns_are_stated_once() -> None:
    table = pa.table({"run_id": ["r", "r"], "cell_id": ["a", "b"], "unsupported": [["99.9"], ["99.9"]]})
    assert constant_columns(table) == {"run_id": "r"}
    assert constant_columns(table.slice(0, 1)) == {}  # one row: shown whole, not emptied


def _run(tables: dict[str, pa.Table]) -> RunData:
    return RunData(Path("lake"), "r1", "2026-11-23", [], tables=tables, gate=GATE_PASSED)


def test_pipeline_section_shows_heads_and_links_not_rows() -> None:
    histogram = pa.table(
        {
            "run_id": ["r1"] * 500,
            "bucket": list(range(500)),
            "lower_ns": [float(2 ** (b / 16)) for b in range(500)],
        }
    )
    html = pipeline_section(_run({"histogram": histogram}), "report-tables")
    assert "500 rows × 3 columns" in html and "passed" in html
    assert 'href="report-tables/histogram.csv"' in html and 'href="report-tables/histogram.parquet"' in html
    assert "<code>run_id</code> = r1" in html  # said once, not in every row
    head = html[html.index("first 5 of 500 rows") :]
    assert head.count("<tr>") == HEAD_ROWS + 1  # the header and five rows
    assert "e+" not in html


def test_full_tables_are_written_beside_the_report(tmp_path: Path) -> None:
    table = pa.table({"cell_id": ["a", "b"], "unsupported": [["99.99"], []], "p50_ns": [1000, None]})
    folder = tmp_path / tables_folder_name(tmp_path / "report.html")
    write_tables(folder, {"percentiles": table})
    assert (folder / "percentiles.csv").read_text().splitlines() == [
        '"cell_id","unsupported","p50_ns"',
        '"a","[""99.99""]",1000',
        '"b","[]",',
    ]
    assert pa.parquet.read_table(folder / "percentiles.parquet").equals(table)


def test_page_table_places_links_unescaped() -> None:
    html = page.table(("file",), [(page.link("a b.csv", "<a>"),)])
    assert '<a href="a b.csv">&lt;a&gt;</a>' in html


def test_svg_images_are_palette_pngs() -> None:
    from bench_tasks.report.charts import Points, scatter_chart

    rng = np.random.default_rng(2)
    at = np.sort(rng.uniform(0, 10, 3000))
    layer = Points("response time", "scatter-x", at, rng.lognormal(14, 1, 3000).astype(np.int64), CYCLE[0])
    svg = scatter_chart("t", [layer], [("measure", 0, 10)], [])
    (data,) = re.findall(r'xlink:href="data:image/png;base64,([^"]+)"', svg)
    assert Image.open(io.BytesIO(base64.b64decode(data))).mode == "P"


def test_stack_rows_first_fit() -> None:
    assert stack_rows([(0, 2), (1, 3), (2.5, 4), (5, 6)]) == [0, 1, 0, 0]
    assert stack_rows([(1, 3), (0, 2)]) == [1, 0]  # by start, whatever the input order
    assert stack_rows([]) == []


def test_fault_and_leader_labels_never_overlap() -> None:
    """Nine events within two seconds (a leader-election storm): the old four fixed heights put the first and
    the fifth label on top of each other."""
    from bench_tasks.report.charts import Marker, Points, scatter_figure

    rng = np.random.default_rng(4)
    at = np.sort(rng.uniform(0, 20, 4000))
    layer = Points("response time", "scatter-x", at, rng.lognormal(14, 1, 4000).astype(np.int64), CYCLE[0])
    markers = [Marker(8 + 0.25 * i, f"leader p{i}: 1 → {2 + i % 2}", CYCLE[1]) for i in range(9)]
    fig = scatter_figure("t", [layer], [("warmup", 0, 5), ("measure", 5, 18), ("cooldown", 18, 20)], markers)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    labels = [t for t in fig.axes[0].texts if t.get_text().startswith("leader")]
    assert len(labels) == 9
    boxes = [Text.get_window_extent(t, renderer) for t in labels]
    for a, b in itertools.combinations(boxes, 2):
        assert not _overlap(a, b)
