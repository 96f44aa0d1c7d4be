"""Reports people can look at: one self-contained HTML file (inline CSS and SVG plots), Markdown, terminal.

``plots`` draws with matplotlib into inline SVG; ``html`` assembles pages from building blocks shared by
``run``, ``compare`` and ``overflow``; ``model`` turns a run journal into the view the renderers need.
"""
