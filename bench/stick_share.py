#!/usr/bin/env python3
"""One rate limit across four proxies (issue 30, docs/rate-limits.md).

Four `rdmalb proxy` processes on loopback in front of one nginx, each with
the same `[[stick_table]]` (`http_req_rate(10s)`, `track-sc0 src`, deny 429
over LIMIT). One client sends at a fixed rate, open loop (each request at
its scheduled time on a keep-alive connection to the proxy whose turn it
is: requests spread evenly, round-robin over the four). A run lasts less
than the rate's period, so every request it sends falls in one period:
the requests answered 200 are what the client got through in that period,
against LIMIT.

Two modes, same proxies, same client:
  local   `shared = false`: each proxy counts its own requests, as
          HAProxy does (its `peers` replicate with a lag and each limits
          on its own counts): up to 4 x LIMIT get through.
  shared  `shared = true` with `[stick_share]` (interval 50 ms): each
          proxy adds the others' increments; the bound is
          LIMIT + R x 3/4 x 0.05 s (docs/rate-limits.md).

Rounds interleave the modes; each cell is the median of ROUNDS runs (the
runs are listed too). Results: bench/results/stick_share-<stamp>.md and
.csv. Run under the bench lock:

    flock /tmp/rdmalb-bench.lock python3 bench/stick_share.py
    flock /tmp/rdmalb-bench.lock python3 bench/stick_share.py --rates 100,400 --rounds 3

The proxies are the build's `target/debug/rdmalb` unless --rdmalb names
another (the rates here are far below what a debug build serves).
"""

import argparse
import asyncio
import datetime
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROXIES = 4
PERIOD_S = 10


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, what, proc=None, bound=10.0):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"{what} exited early")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{what} does not listen on {port}")


def start_nginx(d):
    port = free_port()
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(
            f"worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/nginx-error.log warn;\n"
            "events { worker_connections 1024; }\n"
            f"http {{\n  access_log off;\n  client_body_temp_path {d};\n  proxy_temp_path {d};\n"
            f"  fastcgi_temp_path {d};\n  uwsgi_temp_path {d};\n  scgi_temp_path {d};\n"
            f"  server {{ listen 127.0.0.1:{port}; keepalive_requests 1000000;\n"
            '    location / { default_type text/plain; return 200 "ok\\n"; } }\n}\n'
        )
    p = subprocess.Popen(["nginx", "-c", conf, "-g", "daemon off;"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, "nginx", p)
    return p, port


def start_proxies(rdmalb, d, backend, key, shared, limit):
    web = [free_port() for _ in range(PROXIES)]
    udp = [free_port(socket.SOCK_DGRAM) for _ in range(PROXIES)]
    procs = []
    for i in range(PROXIES):
        peers = ", ".join(f'"127.0.0.1:{udp[j]}"' for j in range(PROXIES) if j != i)
        conf = os.path.join(d, f"p{i}.toml")
        with open(conf, "w") as f:
            f.write(
                f'[[listener]]\nname = "web"\nlisten = "127.0.0.1:{web[i]}"\n\n'
                '[global]\naccess_log = "off"\nworkers = 1\n\n'
                '[[site]]\nname = "www"\nhosts = ["www.example.com"]\n\n'
                f'[[node]]\nname = "n1"\naddress = "127.0.0.1:{backend}"\nsite = "www"\ncheck = false\n\n'
                f'[stick_share]\nlisten = "127.0.0.1:{udp[i]}"\npeers = [{peers}]\nkey_file = "{key}"\n\n'
                '[[stick_table]]\nname = "per_ip"\nkey = "ip"\nsize = 1000\nexpire = "60s"\n'
                f'store = ["http_req_rate({PERIOD_S}s)"]\nshared = {"true" if shared else "false"}\n\n'
                '[[request_rule]]\naction = "track-sc0"\nkey = "src"\n\n'
                '[[request_rule]]\naction = "deny"\nstatus = 429\n'
                f'if = {{ fetch = "sc0_http_req_rate", values = ["gt", "{limit}"] }}\n'
            )
        log = open(os.path.join(d, f"p{i}.log"), "w")
        procs.append(subprocess.Popen([rdmalb, "proxy", "-c", conf], stdout=log, stderr=log,
                                      env={**os.environ, "RDMALB_LOG": "warn"}))
    for i in range(PROXIES):
        wait_port(web[i], f"proxy {i}", procs[i])
    return procs, web


async def client(web, rate, seconds):
    """Open loop: request k at t0 + k/rate on proxy k % 4. Statuses by
    request."""
    n = int(rate * seconds)
    conns = []
    for port in web:
        conns.append(await asyncio.open_connection("127.0.0.1", port))
    statuses = [None] * n
    t0 = time.monotonic() + 0.2
    req = b"GET / HTTP/1.1\r\nHost: www.example.com\r\n\r\n"

    async def worker(w):
        reader, writer = conns[w]
        for k in range(w, n, PROXIES):
            delay = t0 + k / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            writer.write(req)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            statuses[k] = int(lines[0].split()[1])
            length = 0
            for line in lines[1:]:
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            if length:
                await reader.readexactly(length)
    await asyncio.wait_for(asyncio.gather(*(worker(w) for w in range(PROXIES))),
                           timeout=seconds + 20)
    for _, writer in conns:
        writer.close()
    return statuses


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def one_run(rdmalb, d, backend, key, shared, limit, rate, seconds):
    procs, web = start_proxies(rdmalb, d, backend, key, shared, limit)
    try:
        statuses = asyncio.run(client(web, rate, seconds))
    finally:
        stop(procs)
    bad = [s for s in statuses if s not in (200, 429)]
    if bad:
        raise SystemExit(f"unexpected statuses {sorted(set(bad))}")
    return statuses.count(200), len(statuses)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rdmalb", default=os.path.join(ROOT, "target/debug/rdmalb"))
    ap.add_argument("--limit", type=int, default=100, help="requests per 10 s allowed")
    ap.add_argument("--rates", default="100,400", help="client rates, requests/s")
    ap.add_argument("--seconds", type=float, default=6.0, help="run length (< 10 s period)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results"))
    a = ap.parse_args()
    if a.seconds >= PERIOD_S:
        raise SystemExit("--seconds must stay within the rate's 10 s period")
    if not shutil.which("nginx"):
        raise SystemExit("nginx is needed (scripts/setup.sh installs it)")
    rates = [int(r) for r in a.rates.split(",")]
    d = tempfile.mkdtemp(prefix="stick-share-")
    key = os.path.join(d, "share.key")
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, f"rdmalb-psk-v1:{secrets.token_hex(32)}\n".encode())
    os.close(fd)
    nginx, backend = start_nginx(d)
    runs = {}
    try:
        for r in range(a.rounds):
            for rate in rates:
                modes = [False, True] if r % 2 == 0 else [True, False]
                for shared in modes:
                    ok, sent = one_run(a.rdmalb, d, backend, key, shared, a.limit, rate, a.seconds)
                    runs.setdefault((rate, shared), []).append(ok)
                    print(f"round {r} rate {rate}/s {'shared' if shared else 'local '}: "
                          f"{ok} of {sent} admitted (limit {a.limit})", flush=True)
    finally:
        stop([nginx])
        shutil.rmtree(d, ignore_errors=True)
    stamp = datetime.datetime.utcnow().strftime("%Y%m%d-%H%M")
    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, f"stick_share-{stamp}")
    cmd = "flock /tmp/rdmalb-bench.lock python3 bench/stick_share.py " + " ".join(sys.argv[1:])
    with open(base + ".csv", "w") as f:
        f.write("rate,mode,round,admitted,limit\n")
        for (rate, shared), oks in sorted(runs.items()):
            for i, ok in enumerate(oks):
                f.write(f"{rate},{'shared' if shared else 'local'},{i},{ok},{a.limit}\n")
    with open(base + ".md", "w") as f:
        f.write(f"# One rate limit across {PROXIES} proxies ({stamp} UTC)\n\n`{cmd.strip()}`\n\n")
        f.write(f"Limit {a.limit} requests per {PERIOD_S} s per client, one client spreading "
                f"its requests evenly over {PROXIES} proxies for {a.seconds:g} s (one period); "
                f"medians of {a.rounds} runs (runs in brackets).\n\n")
        f.write("| client rate | HAProxy-like (per proxy) | shared | shared bound "
                "(limit + R x 3/4 x 0.05 s) |\n| --- | --- | --- | --- |\n")
        for rate in rates:
            cells = []
            for shared in (False, True):
                oks = runs[(rate, shared)]
                med = statistics.median(oks)
                cells.append(f"{med:g} ({med / a.limit:.2f} x limit) {oks}")
            bound = a.limit + rate * (PROXIES - 1) / PROXIES * 0.05
            f.write(f"| {rate}/s | {cells[0]} | {cells[1]} | {bound:g} |\n")
    print(open(base + ".md").read())
    print(f"written: {base}.md, {base}.csv")


if __name__ == "__main__":
    main()
