"""Synthetic datasets for each task family: deterministic by seed, imbalance controlled exactly."""

from dicelab.data.synthetic._pairs import generate_pairs
from dicelab.data.synthetic._spans import generate_spans
from dicelab.data.synthetic._tagging import TAGS, generate_tagging

__all__ = ["TAGS", "generate_pairs", "generate_spans", "generate_tagging"]
