"""Pure search engine: proposes fusion-switch configurations and learns from their outcomes (no I/O).

Public contract: :class:`Outcome`, :class:`Culprit`, :class:`SearchResult`, :class:`Search`.
"""

from .engine import Search
from .model import Culprit, Outcome, SearchResult, theoretical_bound

__all__ = ["Culprit", "Outcome", "Search", "SearchResult", "theoretical_bound"]
