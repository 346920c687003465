"""The machine-local registry, for kind's nodes to pull from, and for nothing else.

It listens on the kind network's gateway address (the host's side of that bridge, never
every interface) and passes pulls to the registry on localhost. That registry asks for no
credentials, so this is the wall in front of it:

- Only the addresses given with --allow (the kind nodes') are answered; a connection from
  any other address is closed before a byte is read. Pods reach the gateway too, but kindnet
  masquerades their traffic to their node's address, so this alone cannot tell a pod from
  its node; what follows holds for both.
- Only pulls pass: GET or HEAD, without a body, of `/v2/`, `/v2/<name>/manifests/<reference>`
  or `/v2/<name>/blobs/<digest>`. Anything else (a push's POST, PATCH and PUT, a DELETE, a
  catalog or tag listing, an upload's status) is answered 403 and never reaches the registry.
- One request per connection: the forwarder reads one request head (at most 16 KiB, within
  30 s), sends the registry that request as it parsed it (hop-by-hop headers dropped,
  `Connection: close`), relays the answer and closes. Nothing the client sends after its
  head reaches the registry, so no second request can hide behind a checked one.

usage: registry_forward.py LISTEN_HOST:PORT TARGET_HOST:PORT --allow ADDRESS [--allow ADDRESS ...]
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import re
import signal
import sys
from dataclasses import dataclass

MAX_HEAD_BYTES = 16 * 1024
HEAD_SECONDS = 30.0
CONNECT_SECONDS = 10.0
# Connections served at once; more are closed at once (a pod can open as many as it likes).
MAX_CONNECTIONS = 64

# The distribution spec's grammar (github.com/distribution/reference): a repository name's
# path components, a tag, a digest.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_NAME = rf"{_COMPONENT}(?:/{_COMPONENT})*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[A-Za-z0-9=_-]+"
PULL_PATH = re.compile(rf"/v2/|/v2/{_NAME}/manifests/(?:{_TAG}|{_DIGEST})|/v2/{_NAME}/blobs/{_DIGEST}")
# containerd adds ?ns=<registry host> when it pulls through a mirror (its hosts.toml).
QUERY = re.compile(r"[A-Za-z0-9._~%=&+-]*")
TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
FIELD_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}


class Refused(Exception):
    """A request that does not pass: the status to answer, and why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Pull:
    """A request that passes, as it is sent on to the registry."""

    method: str
    target: str
    headers: tuple[tuple[str, str], ...]

    def encode(self) -> bytes:
        lines = [f"{self.method} {self.target} HTTP/1.1"]
        lines += [f"{name}: {value}" for name, value in self.headers]
        lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def check_request(head: bytes) -> Pull:
    """The request whose head (through its blank line) this is, if it is a pull; raises
    Refused otherwise."""
    if not head.endswith(b"\r\n\r\n"):
        raise Refused(400, "the request head does not end")
    request_line, *lines = head[:-4].decode("latin-1").split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
        raise Refused(400, "not an HTTP/1.x request line")
    method, target, _ = parts
    if method not in ("GET", "HEAD"):
        raise Refused(403, f"only pulls pass here (GET, HEAD), not {method[:16]!r}")
    path, _, query = target.partition("?")
    if not PULL_PATH.fullmatch(path) or not QUERY.fullmatch(query):
        raise Refused(
            403, "only pulls pass here: /v2/, /v2/<name>/manifests/<ref>, /v2/<name>/blobs/<digest>"
        )
    fields: list[tuple[str, str]] = []
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon or not TOKEN.fullmatch(name) or not FIELD_VALUE.fullmatch(value):
            raise Refused(400, "a malformed header line")
        fields.append((name, value.strip(" \t")))
    named = {name.lower() for name, _ in fields}
    if "transfer-encoding" in named or any(n.lower() == "content-length" and v != "0" for n, v in fields):
        raise Refused(400, "a pull has no body")
    # Hop-by-hop: the standard ones, and any the client's Connection header names.
    dropped = set(HOP_BY_HOP)
    for name, value in fields:
        if name.lower() == "connection":
            dropped |= {token.strip().lower() for token in value.split(",")}
    kept = tuple((name, value) for name, value in fields if name.lower() not in dropped)
    return Pull(method, target, kept)


def refusal(status: int, reason: str, with_body: bool) -> bytes:
    """The registry's own error shape (distribution's `errors` list), then the connection closes."""
    body = json.dumps({"errors": [{"code": "DENIED", "message": reason}]}).encode()
    title = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large"}[status]
    head = (
        f"HTTP/1.1 {status} {title}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    return head + body if with_body else head


def peer_address(writer: asyncio.StreamWriter) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    peer = writer.get_extra_info("peername")
    try:
        address = ipaddress.ip_address(peer[0])
    except (TypeError, ValueError, IndexError):
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def say(message: str) -> None:
    print(f"registry-forward: {message}", file=sys.stderr, flush=True)


class Forwarder:
    def __init__(
        self, target_host: str, target_port: int, allowed: set[ipaddress.IPv4Address | ipaddress.IPv6Address]
    ) -> None:
        self.target = (target_host, target_port)
        self.allowed = allowed
        self.serving = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        address = peer_address(writer)
        if address not in self.allowed:
            say(f"closed a connection from {address}: not a node")
            writer.close()
            return
        if self.serving >= MAX_CONNECTIONS:
            say(f"closed a connection from {address}: {MAX_CONNECTIONS} served already")
            writer.close()
            return
        self.serving += 1
        try:
            await self._one_request(reader, writer, address)
        except (ConnectionError, OSError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            self.serving -= 1
            writer.close()

    async def _one_request(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        address: ipaddress.IPv4Address | ipaddress.IPv6Address,
    ) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_SECONDS)
        except asyncio.LimitOverrunError:
            writer.write(refusal(431, f"a request head is at most {MAX_HEAD_BYTES} bytes", True))
            await writer.drain()
            return
        try:
            pull = check_request(head)
        except Refused as refused:
            say(f"refused {head.split(b' ', 2)[:2]!r} from {address}: {refused.reason}")
            writer.write(refusal(refused.status, refused.reason, not head.startswith(b"HEAD ")))
            await writer.drain()
            return
        upstream_reader, upstream_writer = await asyncio.wait_for(
            asyncio.open_connection(*self.target), CONNECT_SECONDS
        )
        try:
            upstream_writer.write(pull.encode())
            await upstream_writer.drain()
            while data := await upstream_reader.read(1 << 16):
                writer.write(data)
                await writer.drain()
        finally:
            upstream_writer.close()


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="registry_forward.py", description="kind nodes' pulls, to the registry"
    )
    parser.add_argument("listen", help="HOST:PORT to listen on (the kind network's gateway)")
    parser.add_argument("target", help="HOST:PORT of the registry")
    parser.add_argument("--allow", action="append", required=True, help="a node's address (repeatable)")
    args = parser.parse_args(argv)
    listen_host, listen_port = args.listen.rsplit(":", 1)
    target_host, target_port = args.target.rsplit(":", 1)
    allowed = {ipaddress.ip_address(a) for a in args.allow}
    forwarder = Forwarder(target_host, int(target_port), allowed)
    server = await asyncio.start_server(forwarder.serve, listen_host, int(listen_port), limit=MAX_HEAD_BYTES)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    say(
        f"listening on {args.listen} for {', '.join(sorted(map(str, allowed)))}: pulls only, to {args.target}"
    )
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
