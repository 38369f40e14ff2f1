#!/usr/bin/env python3
"""The admin listener's stats page (GET /stats) in real headless Chromium.

Driven by the e2e test `proxy::stats_page` (tests/proxy/stats_page.rs),
which owns the cluster and the traffic; this script owns the browser. It
talks to the test in JSON lines: it prints one object per phase on stdout
and waits for the test's next command on stdin.

  1. loads URL and waits until the page is live and lists every site and
     node; prints {"phase": "loaded", "page": <what the page shows>}
  2. reads {"expect": {...}} (the test sent traffic, holds slow requests in
     flight and moved a node) and waits until the page shows it all; prints {"phase": "updated", ...};
     takes the screenshot, when asked, at that moment
  3. reads {"stopped": true} (the test stopped the proxy) and waits until
     the page says the proxy is unreachable; prints {"phase": "unreachable", ...}

Every wait is bounded (the page polls /status every second); a wait that
runs out reports what the page showed last, and the test fails on it. Each
phase also reports the console errors, uncaught page errors and failed
requests seen so far: a working page has none while the proxy is up.

Chromium is Debian's (/usr/bin/chromium); Playwright only drives it
(`playwright install` is never run).
"""

import argparse
import json
import signal
import sys
import tempfile
import time

from playwright.sync_api import sync_playwright

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# What the page shows, read from the DOM as a person reads it: the text of
# each cell, by row (data-site, data-node) and column (data-field).
SNAPSHOT_JS = """
() => {
  const rows = (sel, key) => {
    const out = {};
    for (const tr of document.querySelectorAll(sel)) {
      const cells = {};
      for (const td of tr.querySelectorAll("td[data-field]")) cells[td.dataset.field] = td.textContent.trim();
      cells.group = tr.dataset.site || null;
      out[tr.dataset[key]] = cells;
    }
    return out;
  };
  const events = [];
  for (const tr of document.querySelectorAll("#events tbody tr[data-kind]")) {
    const cell = (f) => (tr.querySelector(`td[data-field="${f}"]`) || {}).textContent;
    events.push({ kind: tr.dataset.kind, node: tr.dataset.node, path: cell("path"), epoch: cell("epoch") });
  }
  const conn = document.getElementById("conn");
  return {
    conn: conn.dataset.state,
    conn_text: conn.textContent,
    banner: document.getElementById("banner").textContent,
    title: document.title,
    rps_tile: document.getElementById("t-rps").textContent,
    sites: rows("#sites tbody tr[data-site]", "site"),
    nodes: rows("#nodes tbody tr[data-node]", "node"),
    certs: rows("#certs tbody tr[data-cert]", "cert"),
    events: events,
  };
}
"""


def number(text):
    """A figure as the page prints it ("12", "3.5"); None for "–"."""
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def site_requests(snap, site):
    """Requests relayed by the nodes the page groups under `site`."""
    return sum(
        number(n.get("requests")) or 0 for n in snap["nodes"].values() if n.get("group") == site
    )


def site_rps(snap, site):
    return sum(number(n.get("rps")) or 0 for n in snap["nodes"].values() if n.get("group") == site)


def site_inflight(snap, site):
    return sum(
        number(n.get("inflight")) or 0 for n in snap["nodes"].values() if n.get("group") == site
    )


class Watch:
    """Console errors, page errors and failed requests, as they come."""

    def __init__(self, page):
        self.problems = []
        page.on("console", self.console)
        page.on("pageerror", lambda e: self.problems.append({"kind": "pageerror", "text": str(e)}))
        page.on(
            "requestfailed",
            lambda r: self.problems.append(
                {"kind": "requestfailed", "text": f"{r.method} {r.url}: {r.failure}"}
            ),
        )
        page.on(
            "response",
            lambda r: r.status >= 400
            and self.problems.append({"kind": "http", "text": f"{r.status} {r.url}"}),
        )

    def console(self, msg):
        if msg.type in ("error", "warning"):
            self.problems.append({"kind": "console." + msg.type, "text": msg.text})


def emit(obj):
    print(json.dumps(obj), flush=True)


def command():
    line = sys.stdin.readline()
    if not line:
        raise SystemExit("the test closed stdin")
    return json.loads(line)


def wait_until(page, what, bound_s, ok):
    """Polls the page until ok(snapshot) holds or bound_s passes; returns
    (satisfied, last snapshot, snapshots seen)."""
    deadline = time.monotonic() + bound_s
    seen = []
    while True:
        snap = page.evaluate(SNAPSHOT_JS)
        seen.append(snap)
        if ok(snap):
            return True, snap, seen
        if time.monotonic() > deadline:
            print(f"stats_page.py: gave up waiting for {what}", file=sys.stderr)
            return False, snap, seen
        page.wait_for_timeout(250)


def main():
    # SIGTERM (the test cleaning up) closes Chromium through `finally`.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--screenshot", help="PNG written once the page shows the traffic")
    ap.add_argument("--width", type=int, default=1440)
    ap.add_argument("--height", type=int, default=900)
    args = ap.parse_args()
    chromium = "/usr/bin/chromium"
    with tempfile.TemporaryDirectory(prefix="rdmalb-chromium-") as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            profile,
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": args.width, "height": args.height},
        )
        try:
            page = ctx.new_page()
            watch = Watch(page)
            resp = page.goto(args.url)
            headers = resp.headers if resp else {}
            status = resp.status if resp else None

            # 1. Live, with every site and node of /status on the page.
            start = command()
            want_sites, want_nodes = set(start["sites"]), set(start["nodes"])
            ok, snap, _ = wait_until(
                page,
                "the page to show every site and node",
                30,
                lambda s: s["conn"] == "live"
                and want_sites <= set(s["sites"])
                and want_nodes <= set(s["nodes"]),
            )
            emit(
                {
                    "phase": "loaded",
                    "ok": ok,
                    "status": status,
                    "headers": headers,
                    "page": snap,
                    "problems": watch.problems,
                }
            )

            # 2. The test's traffic and its move show up.
            exp = command()["expect"]
            site, at_least = exp["site"], exp["requests_at_least"]
            moved, moved_to = exp["moved_node"], exp["moved_to"]
            held_site, held = exp["held_site"], exp["inflight_at_least"]
            cells = exp["cells"]

            def shows_it(s):
                return (
                    s["conn"] == "live"
                    and site_requests(s, site) >= at_least
                    and site_inflight(s, held_site) >= held
                    and any(e["kind"] == "admin_move" and e["node"] == moved for e in s["events"])
                    and s["nodes"].get(moved, {}).get("group") == moved_to
                    and all(
                        s["nodes"].get(c["node"], {}).get(c["field"]) == c["text"] for c in cells
                    )
                )

            ok, snap, seen = wait_until(page, "the traffic and the move", 30, shows_it)
            shot = None
            if args.screenshot:
                shot = args.screenshot
                page.screenshot(path=shot, full_page=True)
            emit(
                {
                    "phase": "updated",
                    "ok": ok,
                    "page": snap,
                    "site_requests": site_requests(snap, site),
                    "max_site_rps": max(site_rps(s, site) for s in seen),
                    "screenshot": shot,
                    "problems": watch.problems,
                }
            )

            # 3. The proxy is gone: the page says so.
            command()
            before = len(watch.problems)
            ok, snap, _ = wait_until(
                page, "the page to say the proxy is unreachable", 20, lambda s: s["conn"] == "unreachable"
            )
            emit({"phase": "unreachable", "ok": ok, "page": snap, "problems": watch.problems[before:]})
        finally:
            ctx.close()


if __name__ == "__main__":
    main()
