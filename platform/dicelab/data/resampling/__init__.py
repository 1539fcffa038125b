"""Resampled training sets: the Table 8 variants of the paper (original, +positive, +negative, -negative,
+positive+negative) as a reproducible data operation, with entity-mention replacement for new pairs."""

from dicelab.data.resampling._mentions import BuiltinExtractor, Mentions, SpacyExtractor, make_extractor
from dicelab.data.resampling._presets import PRESETS, VARIANTS, Preset, Target, resolve_target
from dicelab.data.resampling._resample import ResampleResult, resample_frame
from dicelab.data.resampling._store import (
    MANIFEST_FILE,
    VARIANT_FILE,
    materialize_variant,
    read_variant,
    write_variant,
)

__all__ = [
    "MANIFEST_FILE",
    "PRESETS",
    "VARIANTS",
    "VARIANT_FILE",
    "BuiltinExtractor",
    "Mentions",
    "Preset",
    "ResampleResult",
    "SpacyExtractor",
    "Target",
    "make_extractor",
    "materialize_variant",
    "read_variant",
    "resample_frame",
    "resolve_target",
    "write_variant",
]
