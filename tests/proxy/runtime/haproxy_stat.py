#!/usr/bin/env python3
"""A script written for HAProxy's `show stat` CSV, the way HAProxy users
write them (csv.DictReader over the header without its "# "): prints one
line per server, "pxname/svname status weight act bck", sorted. The
runtime test runs it on the real HAProxy's output and on rdmalb's."""
import csv
import sys

text = sys.stdin.read()
if not text.startswith("# "):
    sys.exit("not HAProxy stats CSV: no '# ' header")
rows = csv.DictReader(text[2:].splitlines())
out = []
for row in rows:
    if not row.get("pxname") or row["svname"] in ("FRONTEND", "BACKEND"):
        continue
    out.append("{}/{} {} {} {} {}".format(
        row["pxname"], row["svname"], row["status"], row["weight"], row["act"], row["bck"]))
    int(row["scur"] or 0), int(row["stot"] or 0)  # numeric where HAProxy's are
print("\n".join(sorted(out)))
