#!/usr/bin/env python3
"""Writes the release link's symbol ordering file from what Gatehouse runs.

The kernel maps a binary's code in 64 KiB windows around each page it executes (fault-around),
so code run at start-up and on the request path that lies scattered among cold code keeps most
of `.text` resident: 17.6 of 27.3 MiB in an idle headless server, measured from
/proc/PID/pagemap. Laid out first and together, it needs a few MiB.

This runs `gatehouse serve` (the benchmark's config: SQLite, one client key, the fake upstream)
under `valgrind --tool=callgrind --demangle=no`: start-up, then JSON requests, streams, a
stream the client leaves, the health and metrics routes, then a clean stop. Every function of
the binary that ran is written to the ordering file, start-up's first, each group hottest
first. `src-tauri/build.rs` hands the file to the linker (LLD's `--symbol-ordering-file`) for
release builds; names the code no longer has are skipped, so a stale file costs memory, not
correctness. Re-run it after large changes, on the headless build, then with `--append` on
the desktop build (whose symbols differ where its dependencies' features do):

    scripts/link_order.py --gatehouse target/release/gatehouse --fake target/release/fake-upstream
    scripts/link_order.py --append --gatehouse target/release/gatehouse-desktop --fake ...

Names of functions ThinLTO promoted out of their module (`....llvm.<hash>`) change when that
module's code does, also through another build command's feature unification; such a
function falls back to its default place. `--check BINARY` counts how many names match.
"""

import argparse
import collections
import http.client
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from callgrind_hot_path import (  # noqa: E402
    CLIENT_KEY, body, callgrind, run, set_fake, spawn, start_fake, stop)

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src-tauri",
                           "link-order.txt")


def functions(path, binary):
    """Self cost (instructions) of each function of `binary` in one callgrind dump."""
    names, objs, cost = {}, {}, collections.Counter()
    current_ob, current_fn, after_call = None, None, False
    with open(path) as f:
        for line in f:
            if line.startswith(("ob=", "fn=")):
                kind, _, rest = line.rstrip("\n").partition("=")
                m = re.match(r"\((\d+)\)(?: (.*))?", rest)
                table = objs if kind == "ob" else names
                if m:
                    if m.group(2) is not None:
                        table[m.group(1)] = m.group(2)
                    value = table.get(m.group(1))
                else:
                    value = rest
                if kind == "ob":
                    current_ob = value
                else:
                    current_fn = value if current_ob and current_ob.endswith(binary) else None
                after_call = False
            elif line.startswith(("cob=", "cfi=", "cfl=", "cfn=")):
                m = re.match(r"c(ob|fn)=\((\d+)\) (.*)", line.rstrip("\n"))
                if m:
                    (objs if m.group(1) == "ob" else names)[m.group(2)] = m.group(3)
            elif line.startswith("calls="):
                after_call = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                if after_call:
                    after_call = False  # the inclusive cost of a call, not this function's
                    continue
                parts = line.split()
                if current_fn and len(parts) >= 2:
                    cost[current_fn] += int(parts[1])
    # Callgrind names recursion levels `f'2`; code without a symbol is named by address.
    merged = collections.Counter()
    for name, ir in cost.items():
        name = re.sub(r"'\d+$", "", name)
        if not name.startswith(("0x", "(")):
            merged[name] += ir
    return merged


def leave_a_stream(addr):
    """Opens a stream and closes the socket after its first bytes (the drain path)."""
    host, port = addr.rsplit(":", 1)
    data = body(True)
    with socket.create_connection((host, int(port)), timeout=60) as s:
        s.sendall(
            f"POST /v1/messages HTTP/1.1\r\nhost: {addr}\r\nx-api-key: {CLIENT_KEY}\r\n"
            f"content-type: application/json\r\nanthropic-version: 2023-06-01\r\n"
            f"content-length: {len(data)}\r\n\r\n".encode() + data)
        s.recv(4096)


def check(binary, path):
    """How many of the file's names `binary` has (the rest have drifted: see the docstring)."""
    out = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True,
                         check=True).stdout
    names = {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3}
    with open(path) as f:
        listed = [line.strip() for line in f if line.strip()]
    present = sum(1 for n in listed if n in names)
    print(f"{binary}: {present} of the {len(listed)} names in {path} are its symbols")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--check", metavar="BINARY",
                   help="only count how many of the file's names BINARY has, and exit")
    p.add_argument("--gatehouse")
    p.add_argument("--fake")
    p.add_argument("--out", default=DEFAULT_OUT)
    p.add_argument("--append", action="store_true",
                   help="keep the file's names first and add this binary's others after them "
                        "(the desktop build, whose symbols differ where its features do)")
    a = p.parse_args()
    if a.check:
        return check(a.check, a.out)
    if not (a.gatehouse and a.fake):
        p.error("--gatehouse and --fake are required (or --check BINARY)")
    work = tempfile.mkdtemp(prefix="gh-order-")
    fake, fake_addr, cfg = start_fake(a.fake, work)
    os.environ["CLAUDE_GATEWAY_ALLOW_LOOPBACK"] = "1"
    base = os.path.join(work, "callgrind.out")
    cmd = ["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={base}",
           a.gatehouse, "--data-dir", work, "serve", "--config", cfg]
    gh, gh_addr = spawn(cmd, os.path.join(work, "gatehouse.stderr"), 300)
    try:
        time.sleep(2)
        callgrind(gh.pid, "-d", "startup")
        conn = http.client.HTTPConnection(gh_addr, timeout=120)
        run(conn, gh_addr, 200, False)
        set_fake(fake_addr, {"output_tokens": 16})
        run(conn, gh_addr, 50, True)
        for path in ("/healthz", "/readyz", "/metrics"):
            conn.request("GET", path, headers={"host": gh_addr})
            conn.getresponse().read()
        conn.close()
        set_fake(fake_addr, {"output_tokens": 50, "token_interval_ms": 5})
        for _ in range(5):
            leave_a_stream(gh_addr)
        time.sleep(2)
        callgrind(gh.pid, "-d", "traffic")
    finally:
        stop(gh, fake)
    binary = os.path.basename(a.gatehouse)
    dumps = {}
    for f in os.listdir(work):
        if not f.startswith("callgrind.out"):
            continue
        path = os.path.join(work, f)
        with open(path) as fh:
            head = fh.read(4096)
        m = re.search(r"^desc: Trigger: (?:Client Request: |dump )?(\w+)", head, re.M)
        phase = m.group(1) if m and m.group(1) in ("startup", "traffic") else "rest"
        dumps[phase] = path
    if "startup" not in dumps or "traffic" not in dumps:
        sys.exit(f"callgrind dumps missing in {work}: {sorted(dumps)}")
    startup = functions(dumps["startup"], binary)
    later = collections.Counter()
    for phase in ("traffic", "rest"):
        if phase in dumps:
            later.update(functions(dumps[phase], binary))
    order = [n for n, _ in startup.most_common()]
    order += [n for n, _ in later.most_common() if n not in startup]
    kept = []
    if a.append and os.path.exists(a.out):
        with open(a.out) as f:
            kept = [line.strip() for line in f if line.strip()]
    known = set(kept)
    added = [n for n in order if n not in known]
    with open(a.out, "w") as f:
        f.write("\n".join(kept + added) + "\n")
    print(f"{len(startup)} start-up functions, {len(order)} in all; {len(added)} written to "
          f"{a.out} after {len(kept)} kept")


if __name__ == "__main__":
    main()
