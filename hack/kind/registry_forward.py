"""The machine-local registry, reachable from kind's nodes: listen on the kind network's
gateway address (the host's side of that bridge, never every interface) and pass each
connection to the registry on localhost.

usage: registry_forward.py LISTEN_HOST:PORT TARGET_HOST:PORT
"""

from __future__ import annotations

import asyncio
import signal
import sys


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def main(listen: str, target: str) -> None:
    listen_host, listen_port = listen.rsplit(":", 1)
    target_host, target_port = target.rsplit(":", 1)

    async def accept(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            connecting = asyncio.open_connection(target_host, int(target_port))
            reader, writer = await asyncio.wait_for(connecting, 10)
        except (OSError, TimeoutError):
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, writer), pipe(reader, client_writer))

    server = await asyncio.start_server(accept, listen_host, int(listen_port))
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
