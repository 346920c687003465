"""In a real Jupyter kernel, Client().wait's view is one HTML progress bar, updated in place
(an `update_display_data` per redraw of the same display), with no text lines."""

from __future__ import annotations

import json
import queue
from typing import Any

from jupyter_client.manager import start_new_kernel
from unit.client.jobs import running

CELL = """
import json, sys
from tfmw_client.wait import NotebookView, choose_view
view = choose_view(sys.stdout)
assert isinstance(view, NotebookView), type(view)
job = json.loads({job!r})
for percent, epochs in ((10.0, "1/10"), (50.0, "5/10"), (90.0, "9/10")):
    job["status"]["progress"].update(percent=percent, epochs=epochs)
    view.show(job, percent)
view.close()
"""


def messages_of(client: Any, parent: str) -> list[dict[str, Any]]:
    """The kernel's iopub messages for one execution, until it is idle again."""
    found: list[dict[str, Any]] = []
    while True:
        try:
            message = client.get_iopub_msg(timeout=60)
        except queue.Empty:
            raise AssertionError(f"the kernel went quiet; so far: {found}") from None
        if message["parent_header"].get("msg_id") != parent:
            continue
        found.append(message)
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            return found


def test_the_notebook_bar_is_one_display_updated_in_place() -> None:
    manager, client = start_new_kernel(kernel_name="python3", startup_timeout=120)
    try:
        parent = client.execute(CELL.format(job=json.dumps(running())))
        messages = messages_of(client, parent)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    kinds = [m["msg_type"] for m in messages]
    assert "error" not in kinds and "stream" not in kinds, messages
    shown = [m for m in messages if m["msg_type"] == "display_data"]
    updates = [m for m in messages if m["msg_type"] == "update_display_data"]
    assert len(shown) == 1 and len(updates) == 3, kinds
    display = shown[0]["content"]["transient"]["display_id"]
    assert {u["content"]["transient"]["display_id"] for u in updates} == {display}
    html = [u["content"]["data"]["text/html"] for u in updates]
    assert '<progress value="10.0" max="100"' in html[0] and "1/10 epochs" in html[0]
    assert '<progress value="90.0" max="100"' in html[-1] and "9/10 epochs" in html[-1]
    assert "mnist" in html[-1] and "ETA 4s" in html[-1]
