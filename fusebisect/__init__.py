"""fusebisect: find the CANN fusion rule(s) that break a model's accuracy on Ascend NPUs.

Layers, one direction only: formats (``compare`` readers) -> comparisons (``compare``) -> a pure search
(``search``) -> trial execution and journal (``runner``) -> a thin CLI (``cli``). ``rules`` holds the rule
catalog, ``fusion_switch.cfg`` model and fired-rule evidence; ``sim`` is a simulated Ascend training job for
demos and tests.
"""

__version__ = "0.1.0"
