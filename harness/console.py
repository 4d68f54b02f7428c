"""The terminal: where the harness prints, and tables that fit it."""

from __future__ import annotations

from rich.console import Console
from rich.measure import Measurement

err_console = Console(stderr=True, highlight=False)
out_console = Console(highlight=False)


def si(value: float | None) -> str:
    """A number in three significant digits with k, M or G: 94.4M; "-" for none."""
    if value is None:
        return "-"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def megabytes(value: float | None) -> str:
    """Bytes as whole MB (2**20) with thousands separators: 1,234; "-" for none."""
    return f"{value / 2**20:,.0f}" if value is not None else "-"


def print_table(table, console: Console = out_console, width: int | None = None) -> None:
    """Print a rich table; into a pipe or a file (where rich assumes 80
    columns) at its natural width rather than squeezed, or at `width` for a
    table made to fit it."""
    if console.is_terminal:
        console.print(table)
        return
    if width is not None:
        Console(file=console.file, highlight=False, width=width).print(table)
        return
    width = Measurement.get(console, console.options.update_width(400), table).maximum
    Console(file=console.file, highlight=False, width=max(width, console.width)).print(table)


def fitting_table(
    title: str,
    corner: str,
    rows: list[str],
    columns: list[str],
    cells: list[list[str]],
    *,
    width: int | None = None,
    bold_last_row: bool = False,
):
    """A rich table of `cells[row][column]`, with rows down the side, or
    turned (columns down the side) when that does not fit `width` (the
    console's, at least 80) and the turned one does: every header is shown
    whole, never cut to `eval_r…`."""
    from rich.table import Table

    if width is None:
        width = max(out_console.width, 80) if out_console.is_terminal else 80

    def make(side: list[str], top: list[str], grid: list[list[str]], corner_name: str, bold_row: bool, bold_col: bool):
        table = Table(title=title, show_header=True)
        table.add_column(corner_name, no_wrap=True)
        for i, name in enumerate(top):
            bold = bold_col and i == len(top) - 1
            table.add_column(name, justify="right", no_wrap=True, style="bold" if bold else None)
        for i, (label, values) in enumerate(zip(side, grid, strict=True)):
            table.add_row(label, *values, style="bold" if bold_row and i == len(side) - 1 else None)
        return table

    def natural(table) -> int:
        return Measurement.get(out_console, out_console.options.update_width(10_000), table).maximum

    table = make(rows, columns, cells, corner, bold_last_row, False)
    if natural(table) <= width:
        return table
    turned_cells = [list(column) for column in zip(*cells, strict=True)]
    turned = make(columns, rows, turned_cells, "", False, bold_last_row)
    return turned if natural(turned) < natural(table) else table
