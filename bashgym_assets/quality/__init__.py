"""Stage 3: segmentation of sessions into task examples, the six quality metrics, tiers and manual overrides."""

from bashgym_assets.quality.overrides import clear_override, demote_trace, load_overrides, promote_trace
from bashgym_assets.quality.segment import Segment, segment_session
from bashgym_assets.quality.tiers import TieredTrace, classify, tier_session, tier_sessions

__all__ = [
    "Segment",
    "TieredTrace",
    "classify",
    "clear_override",
    "demote_trace",
    "load_overrides",
    "promote_trace",
    "segment_session",
    "tier_session",
    "tier_sessions",
]
