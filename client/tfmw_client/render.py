"""What `tfmw get`, `describe` and `wait` print: pure functions of the API's JSON and a clock.

Every value read here came from the API server and may be missing or malformed (an older
operator, a hand-written status): a field of the wrong type shows as missing, never as a crash.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from tfmw_client import names

Json = dict[str, Any]
NONE = "-"  # an empty cell, as kubectl's <none> but shorter
INVALID = "<invalid>"  # kubectl's age of a time in the future
LONGEST_DURATION = (2**63 - 1) / 1e9  # seconds: Go's longest time.Duration, about 292 years
BAR_WIDTH = 20
TABLE_BAR_WIDTH = 10
# Conditions that are True only to record something done, not anything happening now.
_QUIET_CONDITIONS = frozenset({"Created", "SharedVolumeChecked"})
_ROLE_ORDER = {role: order for order, role in enumerate(names.ROLES)}
HISTORY_LIMIT = 50  # status.history entries describe shows, the newest
EVENTS_LIMIT = 10  # Events describe shows, the newest
# An Event's time is its creator's word: one dated further ahead than this is not believed.
CLOCK_SKEW = timedelta(minutes=5)
_UNTRUSTED = datetime.min.replace(tzinfo=UTC)  # where an undated or future-dated Event sorts


# ---- reading the JSON defensively ----


def as_dict(value: object) -> Json:
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def as_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def as_str(value: object) -> str:
    return value if isinstance(value, str) else ""


def one_line(text: str, limit: int = 200) -> str:
    """Control characters and newlines out (a status message may hold a log's last lines)."""
    flat = " ".join(
        "".join(c if c.isprintable() else " " for c in line).strip() for line in text.splitlines()
    )
    return cut(flat, limit)


def cut(text: str, limit: int) -> str:
    """`text`, at most `limit` characters, the last an ellipsis when it was longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# The in-pod supervisor's own lines in a worker's log (docs/supervisor.md).
SUPERVISOR_PREFIX = "tfmw-supervisor: "


def program_tail(lines: list[str], count: int) -> list[str]:
    """The program's last `count` lines, with the supervisor's own lines among and after them
    (a supervised pod's log ends with the supervisor's word on the end, which must not push
    the program's last lines out)."""
    program = [i for i, line in enumerate(lines) if not line.startswith(SUPERVISOR_PREFIX)]
    start = program[-count] if len(program) >= count else 0
    return lines[start:]


# Escaped in every cell and field shown, as kubectl (1.26+) escapes them: a value an API
# object holds (an Event's reason is any string its creator chose) must not drive the
# terminal. C0 (ESC, CR, BEL, newline...), DEL, C1, and the bidi overrides and isolates.
_ESCAPED = {"\x1b": "^[", "\r": "\\r", "\n": "\\n", "\t": "\\t"}
_BIDI_CONTROLS = frozenset(chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A)))


def _escaped(char: str) -> str:
    code = ord(char)
    if char in _ESCAPED:
        return _ESCAPED[char]
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return f"\\x{code:02x}"
    if char in _BIDI_CONTROLS:
        return f"\\u{code:04x}"
    return char


def escape_controls(text: str) -> str:
    """The text with every control character written out (ESC as ^[, others as \\xNN or
    \\uNNNN): shown, never obeyed."""
    return "".join(_escaped(c) for c in text)


def printable(text: str) -> str:
    """Lines kept, but no terminal escapes: a log or message is hostile until shown harmless."""
    return "".join(c if c.isprintable() or c in "\n\t" else "?" for c in text)


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 time, in UTC whatever its offset (it is shown with a `Z`); None when it
    is not one, or its UTC falls outside the years 1 to 9999."""
    text = as_str(value)
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        return None


# ---- durations and ages ----


def human_duration(seconds: float) -> str:
    """kubectl's short durations (apimachinery's HumanDuration): 45s, 3m20s, 65m, 2h5m, 3d4h;
    up to 1s in the future is now (clocks differ a little), more is `<invalid>`. Go's
    durations end at about 292 years: so do these (1e308 is 292y, not 309 digits)."""
    if math.isnan(seconds) or seconds <= -2:
        return INVALID
    seconds = max(0, int(min(seconds, LONGEST_DURATION)))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y{days % 365}d" if days < 365 * 8 else f"{days // 365}y"


def age(value: object, now: datetime) -> str:
    when = parse_time(value)
    return human_duration((now - when).total_seconds()) if when else NONE


def when_and_age(value: object, now: datetime) -> str:
    when = parse_time(value)
    if not when:
        return NONE
    shown = human_duration((now - when).total_seconds())
    return f"{when.strftime('%Y-%m-%dT%H:%M:%SZ')} ({shown if shown == INVALID else f'{shown} ago'})"


# ---- progress ----


def percent_of(progress: Mapping[str, Any]) -> float | None:
    """status.progress.percent, else from the steps, else from the epochs; 0 to 100."""
    percent = as_number(progress.get("percent"))
    if percent is None:
        for done_key, total_key in (("step", "totalSteps"), ("epoch", "totalEpochs")):
            done, total = as_number(progress.get(done_key)), as_number(progress.get(total_key))
            if done is not None and total:
                percent = 100.0 * done / total
                break
    return None if percent is None else min(100.0, max(0.0, percent))


def bar(percent: float | None, width: int = BAR_WIDTH, ascii_only: bool = False) -> str:
    """[██████░░░░] (or [######----]); an unknown amount is an empty bar of dots."""
    full, empty = ("#", "-") if ascii_only else ("█", "░")
    if percent is None:
        return "[" + "." * width + "]"
    filled = round(width * percent / 100.0)
    return "[" + full * filled + empty * (width - filled) + "]"


def epochs_text(progress: Mapping[str, Any]) -> str:
    epochs = as_str(progress.get("epochs"))
    if epochs:
        return f"{epochs} epochs" if "/" in epochs else epochs
    epoch, total = as_int(progress.get("epoch")), as_int(progress.get("totalEpochs"))
    if epoch is not None:
        return f"{epoch}/{total} epochs" if total else f"epoch {epoch}"
    return ""


def metrics_text(progress: Mapping[str, Any], limit: int = 3) -> str:
    summary = as_str(progress.get("summary"))
    if summary:
        return one_line(summary, 120)
    metrics = as_dict(progress.get("metrics"))
    shown = [(k, as_number(v)) for k, v in list(metrics.items())[:limit]]
    return " ".join(f"{one_line(str(k), 40)}={v:.4g}" for k, v in shown if v is not None)


def progress_line(progress: Mapping[str, Any], width: int = BAR_WIDTH, ascii_only: bool = False) -> str:
    """[█████░░░░░]  50%  5/10 epochs  ETA 12s  loss=0.31 accuracy=0.91 ("" without progress)."""
    if not progress:
        return ""
    percent = percent_of(progress)
    parts = [bar(percent, width, ascii_only), f"{percent:3.0f}%" if percent is not None else "  ?%"]
    epochs = epochs_text(progress)
    if epochs:
        parts.append(epochs)
    eta = as_str(progress.get("eta"))
    if eta:
        parts.append(f"ETA {eta}")
    metrics = metrics_text(progress)
    if metrics:
        parts.append(metrics)
    return "  ".join(parts)


# ---- tables ----


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], indent: str = "") -> str:
    """Columns padded as kubectl pads them (three spaces between), the last one unpadded;
    every cell's control characters escaped (escape_controls), whatever field it came from."""
    body = [[escape_controls(cell) or NONE for cell in row] for row in rows]
    grid = [list(headers), *body]
    widths = [max(len(row[i]) for row in grid) for i in range(len(headers))]
    lines = []
    for row in grid:
        cells = [cell.ljust(widths[i]) if i < len(row) - 1 else cell for i, cell in enumerate(row)]
        lines.append(indent + "   ".join(cells).rstrip())
    return "\n".join(lines)


def job_row(
    job: Json, now: datetime, wide: bool = False, all_namespaces: bool = False, ascii_only: bool = False
) -> list[str]:
    meta, spec, status = as_dict(job.get("metadata")), as_dict(job.get("spec")), as_dict(job.get("status"))
    progress = as_dict(status.get("progress"))
    percent = percent_of(progress)
    shown_progress = ""
    if progress:
        done = as_str(progress.get("epochs")) or (f"{percent:.0f}%" if percent is not None else "")
        shown_progress = f"{bar(percent, TABLE_BAR_WIDTH, ascii_only)} {done}".rstrip()
    restarts = as_int(status.get("restarts"))
    row = [
        as_str(meta.get("name")),
        as_str(status.get("phase")) or "Pending",
        as_str(status.get("readyWorkers")),
        str(restarts) if restarts is not None else "0",
        shown_progress,
        as_str(progress.get("eta")),
        age(meta.get("creationTimestamp"), now),
    ]
    if all_namespaces:
        row.insert(0, as_str(meta.get("namespace")))
    if wide:
        workers = as_int(spec.get("workers"))
        history = as_list(status.get("history"))
        row += [
            str(workers) if workers is not None else "",
            age(status.get("completionTime"), now) if status.get("completionTime") else "",
            as_str(status.get("reason")),
            metrics_text(progress),
            as_str(as_dict(history[0]).get("cause")) if history else "",
        ]
    return row


def job_table(
    jobs: Sequence[Json],
    now: datetime,
    wide: bool = False,
    all_namespaces: bool = False,
    ascii_only: bool = False,
) -> str:
    headers = ["NAME", "PHASE", "READY", "RESTARTS", "PROGRESS", "ETA", "AGE"]
    if all_namespaces:
        headers.insert(0, "NAMESPACE")
    if wide:
        headers += ["WORKERS", "COMPLETED", "REASON", "METRICS", "LAST CAUSE"]
    ordered = sorted(
        jobs,
        key=lambda j: (
            as_str(as_dict(j.get("metadata")).get("namespace")),
            as_str(as_dict(j.get("metadata")).get("name")),
        ),
    )
    return table(headers, [job_row(j, now, wide, all_namespaces, ascii_only) for j in ordered])


# ---- pods ----


def pod_role(pod: Json) -> str:
    labels = as_dict(as_dict(pod.get("metadata")).get("labels"))
    return (
        as_str(labels.get(names.LABEL_ROLE)) or as_str(labels.get(names.LABEL_REPLICA_TYPE)) or names.WORKER
    )


def pod_index(pod: Json) -> int:
    labels = as_dict(as_dict(pod.get("metadata")).get("labels"))
    try:
        return int(as_str(labels.get(names.LABEL_REPLICA_INDEX)))
    except ValueError:
        return -1


def pod_attempt(pod: Json) -> int | None:
    labels = as_dict(as_dict(pod.get("metadata")).get("labels"))
    try:
        return int(as_str(labels.get(names.LABEL_ATTEMPT)))
    except ValueError:
        return None


def made_by(pod: Json, owner_uid: str) -> bool:
    """Whether the object of `owner_uid` controls the pod (an ownerReference with controller:
    true). The operator sets one to the job on every pod it makes; labels anyone may copy."""
    references = as_list(as_dict(pod.get("metadata")).get("ownerReferences"))
    return bool(owner_uid) and any(
        as_dict(r).get("uid") == owner_uid and as_dict(r).get("controller") is True for r in references
    )


def pod_sort_key(pod: Json) -> tuple[int, int, int, str]:
    attempt = pod_attempt(pod)
    return (
        -(attempt or 0),
        _ROLE_ORDER.get(pod_role(pod), len(_ROLE_ORDER)),
        pod_index(pod),
        as_str(as_dict(pod.get("metadata")).get("name")),
    )


def pod_state(pod: Json) -> str:
    """As kubectl's STATUS column says it: Terminating, an init container's trouble, a
    container's waiting or terminated reason, else the pod's reason or phase."""
    meta, status = as_dict(pod.get("metadata")), as_dict(pod.get("status"))
    if meta.get("deletionTimestamp"):
        return "Terminating"
    for container in (as_dict(c) for c in as_list(status.get("initContainerStatuses"))):
        state = as_dict(container.get("state"))
        terminated, waiting = as_dict(state.get("terminated")), as_dict(state.get("waiting"))
        if terminated and as_int(terminated.get("exitCode")) != 0:
            return f"Init:{as_str(terminated.get('reason')) or 'Error'}"
        if as_str(waiting.get("reason")) not in ("", "PodInitializing"):
            return f"Init:{as_str(waiting.get('reason'))}"
    for container in (as_dict(c) for c in as_list(status.get("containerStatuses"))):
        state = as_dict(container.get("state"))
        for key in ("waiting", "terminated"):
            reason = as_str(as_dict(state.get(key)).get("reason"))
            if reason:
                return reason
    return as_str(status.get("reason")) or as_str(status.get("phase")) or "Pending"


def pod_ready(pod: Json) -> str:
    statuses = as_list(as_dict(pod.get("status")).get("containerStatuses"))
    containers = as_list(as_dict(pod.get("spec")).get("containers"))
    ready = sum(1 for c in statuses if as_dict(c).get("ready") is True)
    return f"{ready}/{len(containers) or len(statuses)}"


def pods_table(pods: Sequence[Json], now: datetime, indent: str = "  ") -> str:
    rows = []
    for pod in sorted(pods, key=pod_sort_key):
        meta = as_dict(pod.get("metadata"))
        attempt = pod_attempt(pod)
        index = pod_index(pod)
        rows.append(
            [
                pod_role(pod),
                str(index) if index >= 0 else "",
                as_str(meta.get("name")),
                pod_state(pod),
                pod_ready(pod),
                str(attempt) if attempt is not None else "",
                as_str(as_dict(pod.get("spec")).get("nodeName")),
                age(meta.get("creationTimestamp"), now),
            ]
        )
    return table(["ROLE", "INDEX", "POD", "STATUS", "READY", "ATTEMPT", "NODE", "AGE"], rows, indent)


# ---- conditions and history ----


def conditions_that_matter(conditions: Iterable[object]) -> list[Json]:
    """True conditions that say something about now (not Created nor SharedVolumeChecked)."""
    return [
        c
        for c in (as_dict(c) for c in conditions)
        if c.get("status") == "True" and as_str(c.get("type")) not in _QUIET_CONDITIONS
    ]


def conditions_table(conditions: Iterable[object], now: datetime, indent: str = "  ") -> str:
    rows = [
        [
            as_str(c.get("type")),
            as_str(c.get("reason")),
            age(c.get("lastTransitionTime"), now),
            one_line(as_str(c.get("message")), 160),
        ]
        for c in conditions_that_matter(conditions)
    ]
    if not rows:
        return f"{indent}(none: no condition needs attention)"
    return table(["TYPE", "REASON", "SINCE", "MESSAGE"], rows, indent)


def checkpoint_text(checkpoint: object) -> str:
    point = as_dict(checkpoint)
    epoch, step, path = (
        as_int(point.get("epoch")),
        as_int(point.get("step")),
        one_line(as_str(point.get("path")), 80),
    )
    parts = []
    if epoch is not None:
        parts.append(f"epoch {epoch}")
    if step is not None:
        parts.append(f"step {step}")
    text = ", ".join(parts)
    if path:
        text = f"{text} ({path})" if text else path
    return text


def job_relative_log(job_name: str, namespace: str, logs: str) -> str:
    """status.history[].logs is relative to the shared root; shown relative to the job's folder."""
    prefix = f"{namespace}/{job_name}/"
    return logs[len(prefix) :] if logs.startswith(prefix) else logs


def shown_history(job: Json) -> tuple[list[Json], int]:
    """The newest HISTORY_LIMIT entries of status.history (kept newest first), and how many
    older ones are left out: a job restarted thousands of times is not thousands of lines."""
    history = [as_dict(e) for e in as_list(as_dict(job.get("status")).get("history"))]
    return history[:HISTORY_LIMIT], max(0, len(history) - HISTORY_LIMIT)


def history_table(job: Json, indent: str = "  ") -> str:
    meta = as_dict(job.get("metadata"))
    name, namespace = as_str(meta.get("name")), as_str(meta.get("namespace"))
    entries, left_out = shown_history(job)
    rows = []
    for entry in entries:
        attempt, worker, code, lost = (
            as_int(entry.get(k)) for k in ("attempt", "worker", "exitCode", "epochsLost")
        )
        rows.append(
            [
                str(attempt) if attempt is not None else "",
                as_str(entry.get("outcome")),
                as_str(entry.get("cause")),
                str(worker) if worker is not None else "",
                as_str(entry.get("node")),
                str(code) if code is not None else "",
                checkpoint_text(entry.get("checkpoint")),
                str(lost) if lost is not None else "",
                job_relative_log(name, namespace, one_line(as_str(entry.get("logs")), 120)),
            ]
        )
    if not rows:
        return f"{indent}(none: no attempt has ended)"
    shown = table(
        ["ATTEMPT", "OUTCOME", "CAUSE", "WORKER", "NODE", "EXIT", "CHECKPOINT", "EPOCHS LOST", "LOG"],
        rows,
        indent,
    )
    return f"{shown}\n{indent}({left_out} older attempts not shown)" if left_out else shown


def history_messages(job: Json, indent: str = "  ") -> list[str]:
    lines = []
    for entry in shown_history(job)[0]:
        message = one_line(as_str(entry.get("message")), 240)
        attempt = as_int(entry.get("attempt"))
        if message and attempt is not None:
            lines.append(f"{indent}attempt {attempt}: {message}")
    return lines


def read_log_hint(job: Json) -> str:
    """The command that prints the log of the newest ended attempt's failed worker."""
    meta = as_dict(job.get("metadata"))
    history = [as_dict(e) for e in as_list(as_dict(job.get("status")).get("history"))]
    if not history:
        return ""
    attempt, worker = as_int(history[0].get("attempt")), as_int(history[0].get("worker"))
    if attempt is None:
        return ""
    who = f" --worker {worker}" if worker is not None else " --all"
    return f"tfmw logs {as_str(meta.get('name'))} --attempt {attempt}{who}"


def event_time(event: Json) -> str:
    """When the Event last happened, as its creator wrote it."""
    return (
        as_str(event.get("lastTimestamp"))
        or as_str(event.get("eventTime"))
        or as_str(as_dict(event.get("metadata")).get("creationTimestamp"))
    )


def event_sort_time(event: Json, now: datetime) -> datetime:
    """The Event's time for choosing the newest: an unreadable one, or one dated in the
    future (past the clock skew), sorts as the oldest, so it cannot push real ones out."""
    when = parse_time(event_time(event))
    return when if when is not None and when <= now + CLOCK_SKEW else _UNTRUSTED


def events_table(events: Sequence[Json], now: datetime, limit: int = EVENTS_LIMIT, indent: str = "  ") -> str:
    dated = sorted(
        enumerate(as_dict(e) for e in events), key=lambda pair: (event_sort_time(pair[1], now), pair[0])
    )
    newest = [event for _, event in dated[-limit:]] if limit > 0 else []
    left_out = len(dated) - len(newest)
    rows = [
        [
            as_str(e.get("type")),
            as_str(e.get("reason")),
            age(event_time(e), now),
            one_line(as_str(e.get("message")), 160),
        ]
        for e in newest
    ]
    if not rows:
        return f"{indent}(none)"
    shown = table(["TYPE", "REASON", "AGE", "MESSAGE"], rows, indent)
    if left_out:
        shown += f"\n{indent}({left_out} older, undated or future-dated events not shown)"
    return shown


def describe(
    job: Json, pods: Sequence[Json], events: Sequence[Json] | None, now: datetime, ascii_only: bool = False
) -> str:
    meta, spec, status = as_dict(job.get("metadata")), as_dict(job.get("spec")), as_dict(job.get("status"))
    progress = as_dict(status.get("progress"))
    phase = as_str(status.get("phase")) or "Pending"
    attempt, restarts = as_int(status.get("attempt")), as_int(status.get("restarts"))
    backoff = as_int(as_dict(spec.get("runPolicy")).get("backoffLimit"))
    phase_note = []
    if attempt is not None:
        phase_note.append(f"attempt {attempt}")
    if restarts is not None:
        phase_note.append(f"{restarts} of {backoff if backoff is not None else 3} gang restarts used")
    fields: list[tuple[str, str]] = [
        ("Name", as_str(meta.get("name"))),
        ("Namespace", as_str(meta.get("namespace"))),
        ("Phase", f"{phase} ({'; '.join(phase_note)})" if phase_note else phase),
    ]
    if status.get("reason"):
        fields.append(("Reason", as_str(status.get("reason"))))
    if status.get("message"):
        fields.append(("Message", one_line(as_str(status.get("message")), 400)))
    if progress:
        fields.append(("Progress", progress_line(progress, BAR_WIDTH, ascii_only)))
        examples = as_number(progress.get("examplesPerSecond"))
        if examples is not None:
            fields.append(("Throughput", f"{examples:,.0f} examples/s"))
        if progress.get("checkpoint"):
            fields.append(("Checkpoint", checkpoint_text(progress.get("checkpoint"))))
        if progress.get("error"):
            fields.append(("Progress error", one_line(as_str(progress.get("error")))))
    else:
        fields.append(("Progress", "(no progress reported yet)"))
    workers = as_int(spec.get("workers"))
    ready = as_str(status.get("readyWorkers"))
    fields.append(
        ("Workers", f"{workers if workers is not None else '?'}" + (f" ({ready} ready)" if ready else ""))
    )
    claim = as_str(as_dict(spec.get("sharedVolume")).get("claimName"))
    if claim:
        fields.append(
            (
                "Shared volume",
                f"claim {claim}, folder {as_str(meta.get('namespace'))}/{as_str(meta.get('name'))}/",
            )
        )
    fields.append(("Created", when_and_age(meta.get("creationTimestamp"), now)))
    fields.append(("Started", when_and_age(status.get("startTime"), now)))
    fields.append(("Completed", when_and_age(status.get("completionTime"), now)))
    width = max(len(k) for k, _ in fields) + 2
    out = [f"{(key + ':').ljust(width)}{escape_controls(value)}" for key, value in fields]
    out += ["", "Pods:" if pods else "Pods: (none)"]
    if pods:
        out.append(pods_table(pods, now))
    out += ["", "Conditions:", conditions_table(as_list(status.get("conditions")), now)]
    out += ["", "History (the newest first):", history_table(job)]
    messages = history_messages(job)
    if messages:
        out += ["", "  Why each attempt ended:", *(f"  {escape_controls(m)}" for m in messages)]
    hint = read_log_hint(job)
    if hint:
        out += ["", f"  The failed worker's log: {escape_controls(hint)}"]
    if events is not None:
        out += ["", "Events:", events_table(events, now)]
    return "\n".join(out) + "\n"
