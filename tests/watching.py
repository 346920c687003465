"""A watch that survives what API servers do to watches: the tests' and the bench's one way.

List, then watch from the list's resourceVersion; a watch that ends is resumed where it
was. A 410 (compacted), a 504 (the watch cache is behind: a fresh API server on old
etcd data), an ERROR event or a dropped connection means listing again, after a pause.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import watch

Json = dict[str, Any]
WATCH_SECONDS = 5  # short: a stop is noticed within this


class _Relist(Exception):
    pass


def follow(
    list_call: Callable[..., Any],
    *args: Any,
    on_event: Callable[[str, Json], None],
    stop: threading.Event,
    **kwargs: Any,
) -> None:
    """Call on_event(type, object) for every object listed (as ADDED) and every change,
    until `stop` is set. Objects are plain JSON."""
    while not stop.is_set():
        try:
            listed = json.loads(list_call(*args, _preload_content=False, **kwargs).data)
            for item in listed.get("items") or []:
                on_event("ADDED", item)
            version = listed["metadata"]["resourceVersion"]
            while not stop.is_set():
                stream = watch.Watch().stream(
                    list_call,
                    *args,
                    resource_version=version,
                    timeout_seconds=WATCH_SECONDS,
                    allow_watch_bookmarks=True,
                    **kwargs,
                )
                for event in stream:
                    if event["type"] == "ERROR":
                        raise _Relist(event["raw_object"])
                    obj = event["raw_object"]
                    version = obj["metadata"]["resourceVersion"]
                    if event["type"] != "BOOKMARK":
                        on_event(event["type"], obj)
                    if stop.is_set():
                        return
        except Exception:  # _Relist, 410/504 as ApiException, a dropped connection
            time.sleep(0.5)


def follow_in_thread(list_call: Callable[..., Any], *args: Any, **kwargs: Any) -> threading.Thread:
    thread = threading.Thread(target=follow, args=(list_call, *args), kwargs=kwargs, daemon=True)
    thread.start()
    return thread
