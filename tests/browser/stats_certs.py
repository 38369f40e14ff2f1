#!/usr/bin/env python3
"""The stats page's certificates table in real headless Chromium.

Driven by the e2e test `proxy::acme::acme_stats_page_shows_the_certificates_in_chromium`
(tests/proxy/acme.rs), which runs pebble and a proxy with `[acme]` and a
certificate file, and waits until /status has what the page must show.
This script loads URL, waits (30 s at most) until the page is live and its
certificates table has a row for each CERT given (a certificate's name for
ACME, the file's path for a file) whose not-after cell is filled, then
prints one JSON object: {"ok", "page" (what the page shows, cell texts by
row and column), "problems" (console errors, page errors, failed
requests)} and exits. The test compares the cells with /status.

Chromium is Debian's (/usr/bin/chromium); Playwright only drives it.
"""

import argparse
import signal
import sys
import tempfile

from playwright.sync_api import sync_playwright

from stats_page import CHROMIUM_ARGS, Watch, emit, wait_until


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("cert", nargs="+", help="a row the table must show")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rdmalb-chromium-") as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            profile,
            executable_path="/usr/bin/chromium",
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1440, "height": 900},
        )
        try:
            page = ctx.new_page()
            watch = Watch(page)
            page.goto(args.url)

            def shows_them(s):
                certs = s["certs"]
                return s["conn"] == "live" and all(c in certs for c in args.cert)

            ok, snap, _ = wait_until(page, "a row for every certificate", 30, shows_them)
            emit({"ok": ok, "page": snap, "problems": watch.problems})
        finally:
            ctx.close()


if __name__ == "__main__":
    main()
