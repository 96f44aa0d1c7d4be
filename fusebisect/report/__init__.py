"""Reports people can look at: one self-contained HTML file (inline CSS and SVG plots), Markdown, terminal.

``plots`` draws with matplotlib into inline SVG; ``html`` assembles pages from building blocks shared by
``run``, ``compare`` and ``overflow``; ``model`` turns a run journal into the view the renderers need.
"""

from __future__ import annotations


from pathlib import Path


def write_run_reports(workdir: str | Path) -> tuple[Path, Path]:
    """Render ``WORKDIR/report.html`` and ``WORKDIR/report.md`` from the run's journal (atomically).

    Returns both paths. Raises FusebisectError when WORKDIR holds no journal."""
    from fusebisect.fsutil import atomic_write_text
    from fusebisect.report.html import render_run
    from fusebisect.report.markdown import render_run_markdown
    from fusebisect.report.model import load_run_view, production_cfg_text
    from fusebisect.rules.catalog import default_catalog

    workdir = Path(workdir)
    view = load_run_view(workdir)
    catalog = default_catalog()
    cfg = production_cfg_text(view)
    html_path = atomic_write_text(workdir / "report.html", render_run(view, catalog=catalog, production_cfg=cfg))
    md_path = atomic_write_text(workdir / "report.md", render_run_markdown(view, catalog=catalog, production_cfg=cfg))
    return html_path, md_path
