"""Stage 2: redaction of secrets and personal data (presidio recognizers + our secret detectors), offline."""

from bashgym_assets.privacy.redactor import FieldFinding, PlaceholderMap, Redactor, SessionRedaction

__all__ = ["FieldFinding", "PlaceholderMap", "Redactor", "SessionRedaction"]
