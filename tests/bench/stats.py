"""The benchmarks' arithmetic, pure: percentiles, summaries, ratios, and what is read from
the API server's /metrics text (write counters, the request-latency histogram)."""

from __future__ import annotations

import math
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Collection, Iterator

WRITE_VERBS = ("POST", "PATCH", "PUT", "DELETE", "APPLY")
# (verb, resource, subresource)
Key = tuple[str, str, str]
# le bound -> cumulative count, per verb
Histogram = dict[str, dict[float, float]]


def say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile q (0..100) of values."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median_s": round(statistics.median(values), 4),
        "p99_s": round(percentile(values, 99), 4),
        "max_s": round(max(values), 4),
    }


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """ours / theirs, or None where either is missing or theirs is 0."""
    if ours is None or theirs is None or theirs == 0:
        return None
    return round(ours / theirs, 3)


def _samples(text: str, metric: str) -> Iterator[tuple[dict[str, str], float]]:
    pattern = re.compile(rf"^{re.escape(metric)}\{{(.*)\}} (\S+)$")
    for line in text.splitlines():
        match = pattern.match(line)
        if match:
            yield dict(re.findall(r'(\w+)="([^"]*)"', match.group(1))), float(match.group(2))


def write_counts(text: str, skip_groups: Collection[str] = ()) -> dict[Key, float]:
    """apiserver_request_total for writes, summed by (verb, resource, subresource), without
    those to the API groups in `skip_groups`."""
    counts: dict[Key, float] = defaultdict(float)
    for labels, value in _samples(text, "apiserver_request_total"):
        if labels.get("verb") in WRITE_VERBS and labels.get("group", "") not in skip_groups:
            counts[(labels["verb"], labels.get("resource", ""), labels.get("subresource", ""))] += value
    return dict(counts)


def writes_between(
    before: dict[Key, float], after: dict[Key, float], ignored: Collection[str] = ()
) -> dict[str, int]:
    """The writes made between two counts, as "VERB resource[/sub]": n, leaving out the
    resources (or resource/sub) in `ignored`."""
    made = {}
    for key, value in after.items():
        verb, resource, sub = key
        name = f"{resource}/{sub}" if sub else resource
        delta = round(value - before.get(key, 0))
        if delta > 0 and resource not in ignored and name not in ignored:
            made[f"{verb} {name}"] = delta
    return made


def request_durations(text: str) -> Histogram:
    """apiserver_request_duration_seconds buckets, summed over resources, by verb
    (WATCH and CONNECT left out: they last as long as the client wants)."""
    buckets: Histogram = defaultdict(lambda: defaultdict(float))
    for labels, value in _samples(text, "apiserver_request_duration_seconds_bucket"):
        verb = labels.get("verb", "")
        if verb in ("WATCH", "CONNECT") or "le" not in labels:
            continue
        buckets[verb][math.inf if labels["le"] == "+Inf" else float(labels["le"])] += value
    return {verb: dict(b) for verb, b in buckets.items()}


def histogram_between(before: Histogram, after: Histogram) -> Histogram:
    return {
        verb: {le: count - before.get(verb, {}).get(le, 0.0) for le, count in b.items()}
        for verb, b in after.items()
    }


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """As Prometheus computes it: linear within the bucket the q-th request falls in (the
    lower bucket's bound when it falls in +Inf). None without requests."""
    bounds = sorted(buckets)
    total = buckets[bounds[-1]] if bounds else 0.0
    if total <= 0:
        return None
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = bound, count
    return lower_bound


def merged(histogram: Histogram, verbs: tuple[str, ...] | None = None) -> dict[float, float]:
    """The buckets of several verbs (all by default) as one histogram."""
    total: dict[float, float] = defaultdict(float)
    for verb, buckets in histogram.items():
        if verbs is None or verb in verbs:
            for le, count in buckets.items():
                total[le] += count
    return dict(total)


def latency_summary(histogram: Histogram) -> dict[str, float | int | None]:
    """p50/p99 (ms) and the request count of reads and writes, from a histogram's delta."""
    out: dict[str, float | int | None] = {}
    for name, verbs in (("reads", ("GET", "LIST")), ("writes", WRITE_VERBS)):
        buckets = merged(histogram, verbs)
        out[f"{name}_requests"] = round(max(buckets.values(), default=0.0))
        for q in (0.5, 0.99):
            value = histogram_quantile(q, buckets)
            out[f"{name}_p{round(q * 100)}_ms"] = None if value is None else round(value * 1000, 1)
    return out
