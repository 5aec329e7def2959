#!/usr/bin/env python3
"""A TCP proxy that adds latency, to benchmark against a "remote" API server.

    scripts/latency-proxy.py LISTEN_PORT TARGET_HOST:TARGET_PORT [RTT_MS]

Every byte is delivered RTT_MS/2 later than it arrived, in each direction (default RTT 50 ms),
without limiting throughput: a request/answer round trip costs RTT_MS more, as on a link to a
cluster far away. TLS passes through untouched (the server's certificate names 127.0.0.1, so
a kubeconfig whose server is https://127.0.0.1:LISTEN_PORT keeps verifying it).
"""
import asyncio
import sys


async def pump(reader, writer, delay):
    """Copies reader to writer, each chunk held `delay` seconds after it arrived."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def deliver():
        while True:
            due, chunk = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if chunk is None:
                break
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    sender = asyncio.create_task(deliver())
    try:
        while True:
            chunk = await reader.read(65536)
            queue.put_nowait((loop.time() + delay, chunk or None))
            if not chunk:
                break
        await sender
    except (ConnectionError, asyncio.CancelledError):
        sender.cancel()
    finally:
        writer.close()


async def main():
    listen_port = int(sys.argv[1])
    target_host, target_port = sys.argv[2].rsplit(":", 1)
    delay = (float(sys.argv[3]) if len(sys.argv) > 3 else 50.0) / 2000.0

    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection(target_host, int(target_port))
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            pump(client_reader, server_writer, delay),
            pump(server_reader, client_writer, delay),
            return_exceptions=True,
        )

    server = await asyncio.start_server(handle, "127.0.0.1", listen_port)
    print(f"latency-proxy: 127.0.0.1:{listen_port} -> {target_host}:{target_port}, "
          f"{delay * 2000:.0f} ms round trip", file=sys.stderr, flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
