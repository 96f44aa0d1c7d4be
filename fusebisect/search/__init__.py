"""Pure search engine: proposes fusion-switch configurations and learns from their outcomes (no I/O).

Public contract: :class:`Outcome`, :class:`Culprit`, :class:`SearchResult`, :class:`Search`; ``PRIOR_SINGLES``, how
many rules of a prior are run alone before the group search.
"""

from .engine import PRIOR_SINGLES, Search
from .model import Culprit, Outcome, SearchResult, theoretical_bound

__all__ = ["PRIOR_SINGLES", "Culprit", "Outcome", "Search", "SearchResult", "theoretical_bound"]
