"""Time as the API writes it, held to the calendar: limits come from specs, statuses and
files, and any of them may be absurd (activeDeadlineSeconds 2**63-1 is valid)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# The ends of the calendar: a time limit that runs past the last one never fires.
NEVER = datetime.max.replace(tzinfo=UTC)
DAWN = datetime.min.replace(tzinfo=UTC)


def later(start: datetime, seconds: float) -> datetime:
    """`start` plus `seconds`, held to the calendar."""
    try:
        return start + timedelta(seconds=seconds)
    except OverflowError:
        return NEVER if seconds > 0 else DAWN


def _utc(value: datetime) -> datetime:
    # astimezone() may step past the calendar's end from an offset near it.
    try:
        return value.astimezone(UTC)
    except OverflowError:
        return NEVER if value.year > 1 else DAWN


def format_time(value: datetime) -> str:
    """Kubernetes' timestamp format (RFC 3339, seconds, UTC); years padded to four digits,
    which strftime does not do below 1000."""
    v = _utc(value)
    return f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}Z"


def format_precise_time(value: datetime) -> str:
    """RFC 3339 with milliseconds: progress figures come faster than once a second."""
    v = _utc(value)
    return format_time(v)[:-1] + f".{v.microsecond // 1000:03d}Z"


def parse_time(value: object) -> datetime | None:
    """A Kubernetes timestamp, or None for anything that is not one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
