"""Spoofing scheme detectors (layering, flipping, vacuuming) over normalised market
events. Plain Python, no Django. See docs/DETECTION_METHOD.md."""

from .engine import CONFIDENCE_WEIGHTS, DetectorEngine, SchemeEvent

__all__ = ["CONFIDENCE_WEIGHTS", "DetectorEngine", "SchemeEvent"]
