#!/usr/bin/env python3
"""Hold N idle HTTP/1.1 keep-alive connections open against a proxy.

    python3 bench/proxy/idle_conns.py --port P --conns 10000 --release FILE \
        [--host bench.localhost] [--parallel 100] [--hold-max 120]

Opens N connections to 127.0.0.1:PORT, at most --parallel at a time, and on
each sends one GET / and reads the whole response (Content-Length), so every
connection is an established keep-alive connection the proxy has served
once and now keeps idle. Then it prints one line

    READY opened=N failed=F seconds=S

and holds them until the file --release exists (or --hold-max seconds have
passed, so it can never outlive the benchmark that started it). Before it
closes them it checks each for an end of file (the proxy closed it while it
was held) and prints

    DONE held=N closed_early=K

Only loopback, only the one port; everything is bounded by --hold-max and
per-operation timeouts. Used by bench/proxy/scenarios.sh (scenario idle10k).
"""

import argparse
import asyncio
import os
import socket
import sys
import time


async def open_one(port, host, sem, timeout):
    async with sem:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
        try:
            request = f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
            writer.write(request)
            await asyncio.wait_for(writer.drain(), timeout)
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
            status = head.split(b" ", 2)[1]
            length = None
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
                if name.strip().lower() == b"connection" and value.strip().lower() == b"close":
                    raise ConnectionError("the proxy answered Connection: close")
            if length is None:
                raise ConnectionError("response without Content-Length")
            await asyncio.wait_for(reader.readexactly(length), timeout)
            if status != b"200":
                raise ConnectionError(f"status {status.decode(errors='replace')}")
        except BaseException:
            writer.close()
            raise
        return reader, writer


async def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--conns", type=int, required=True)
    ap.add_argument("--release", required=True, help="hold until this file exists")
    ap.add_argument("--host", default="bench.localhost")
    ap.add_argument("--parallel", type=int, default=100)
    ap.add_argument("--hold-max", type=float, default=120.0)
    ap.add_argument("--timeout", type=float, default=10.0, help="per connect/request")
    args = ap.parse_args()

    start = time.monotonic()
    sem = asyncio.Semaphore(args.parallel)
    results = await asyncio.gather(
        *(open_one(args.port, args.host, sem, args.timeout) for _ in range(args.conns)),
        return_exceptions=True,
    )
    conns = [r for r in results if not isinstance(r, BaseException)]
    errors = [r for r in results if isinstance(r, BaseException)]
    first_error = f" first_error={type(errors[0]).__name__}:{errors[0]}" if errors else ""
    print(
        f"READY opened={len(conns)} failed={len(errors)} seconds={time.monotonic() - start:.1f}{first_error}",
        flush=True,
    )

    deadline = start + args.hold_max
    while not os.path.exists(args.release) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)

    # A connection the proxy closed while it was held reads as EOF (or a
    # reset) at once; an open one would block, so peek without waiting.
    closed_early = 0
    for reader, writer in conns:
        sock = writer.get_extra_info("socket")
        try:
            raw = socket.socket(fileno=os.dup(sock.fileno()))
            raw.setblocking(False)
            try:
                if raw.recv(1, socket.MSG_PEEK) == b"":
                    closed_early += 1
            except BlockingIOError:
                pass
            except OSError:
                closed_early += 1
            finally:
                raw.close()
        except OSError:
            closed_early += 1
        writer.close()
    print(f"DONE held={len(conns)} closed_early={closed_early}", flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(130)
