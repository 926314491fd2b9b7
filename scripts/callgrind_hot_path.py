#!/usr/bin/env python3
"""Instruction counts of Gatehouse's plain request path under callgrind.

Wall-clock timing is meaningless on a busy machine; instruction counts are not. This runs
the fake upstream natively and `gatehouse serve` under `valgrind --tool=callgrind` with the
benchmark's "gatehouse" config (crates/bench/src/stack.rs: SQLite, one client key, the fake
as the only upstream) and sends the benchmark's requests on one keep-alive connection:
a warm-up, then N JSON requests (counters zeroed before, dumped after), then M streams of
16 events (likewise). It prints instructions per request of each phase.

    scripts/callgrind_hot_path.py --gatehouse BIN --fake BIN [--out DIR] [--json N] [--streams M]

Read a phase with `callgrind_annotate --inclusive=yes DIR/callgrind.out.<phase>`.
"""

import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

CLIENT_KEY = "bench-client-key-0123456789abcdef0123456789"


def body(stream):
    s = ',"stream":true' if stream else ""
    return ('{"model":"claude-sonnet-4-6","max_tokens":64,'
            '"messages":[{"role":"user","content":"hi"}]' + s + "}").encode()


def headers(host):
    return {"host": host, "x-api-key": CLIENT_KEY, "content-type": "application/json",
            "anthropic-version": "2023-06-01"}


def spawn(cmd, stderr_path, timeout):
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=open(stderr_path, "wb"))
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline().decode(errors="replace")
        if not line:
            break
        m = re.search(r"listening on http://(\S+)", line)
        if m:
            return proc, m.group(1).rstrip("/")
    sys.exit(f"{cmd[0]} did not start; see {stderr_path}")


def post(conn, host, path, data):
    conn.request("POST", path, body=data, headers=headers(host))
    resp = conn.getresponse()
    out = resp.read()
    if resp.status not in (200, 204):
        sys.exit(f"{path} answered {resp.status}: {out[:300]!r}")
    return out


def set_fake(fake, cfg):
    conn = http.client.HTTPConnection(fake)
    post(conn, fake, "/_fake/config", json.dumps(cfg).encode())
    post(conn, fake, "/_fake/recording", b'{"on":false}')
    conn.close()


def run(conn, host, n, stream):
    data = body(stream)
    for _ in range(n):
        out = post(conn, host, "/v1/messages", data)
        if stream and b"content_block_delta" not in out:
            sys.exit("a stream without content_block_delta")


def callgrind(pid, *args):
    subprocess.run(["callgrind_control", *args, str(pid)], check=True,
                   stdout=subprocess.DEVNULL)


def total_ir(path):
    with open(path) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    return 0


def start_fake(fake_bin, work):
    """The fake upstream, natively, and the benchmark's gatehouse config in `work` pointing
    at it (crates/bench/src/stack.rs: SQLite, one client key): (process, address, config)."""
    fake, fake_addr = spawn([fake_bin, "--listen", "127.0.0.1:0", "--exit-on-stdin-eof"],
                            os.path.join(work, "fake.stderr"), 30)
    set_fake(fake_addr, {})
    cfg = os.path.join(work, "gatehouse.yaml")
    with open(cfg, "w") as f:
        f.write(
            "listen: {host: 127.0.0.1, port: 0}\n"
            f"store: {{sqlite_path: \"{work}/bench.db\"}}\n"
            "rate_limits: {client_key_concurrency: 0}\n"
            "timeouts: {shutdown_drain_ms: 2000}\n"
            "upstreams:\n  - {name: fake, provider: anthropic, base_url: \"http://"
            f"{fake_addr}\", auth: {{api_key: bench-operator-key-not-secret}}}}\n"
            f"client_keys:\n  - {{id: bench, key: \"{CLIENT_KEY}\"}}\n")
    return fake, fake_addr, cfg


def stop(gh, fake):
    """Stops gatehouse (SIGTERM: callgrind writes its last dump) and the fake."""
    gh.send_signal(signal.SIGTERM)
    try:
        gh.wait(120)
    except subprocess.TimeoutExpired:
        gh.kill()
    fake.stdin.close()
    fake.wait(10)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gatehouse", required=True)
    p.add_argument("--fake", required=True)
    p.add_argument("--out", default=None)
    p.add_argument("--json", type=int, default=2000)
    p.add_argument("--streams", type=int, default=200)
    p.add_argument("--events", type=int, default=16)
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE for gatehouse")
    a = p.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="gh-callgrind-")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="gh-cg-work-")

    fake, fake_addr, cfg = start_fake(a.fake, work)
    env = dict(os.environ)
    # The config points at the fake on loopback, which the gateway refuses unless told.
    env["CLAUDE_GATEWAY_ALLOW_LOOPBACK"] = "1"
    for kv in a.env:
        k, v = kv.split("=", 1)
        env[k] = v
    base = os.path.join(out, "callgrind.out")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={base}",
           a.gatehouse, "--data-dir", work, "serve", "--config", cfg]
    os.environ.update(env)
    gh, gh_addr = spawn(cmd, os.path.join(out, "gatehouse.stderr"), 300)
    try:
        conn = http.client.HTTPConnection(gh_addr, timeout=120)
        run(conn, gh_addr, 200, False)
        run(conn, gh_addr, 20, True)
        time.sleep(1)
        callgrind(gh.pid, "-z")
        run(conn, gh_addr, a.json, False)
        time.sleep(0.5)  # the recorder's last batch
        callgrind(gh.pid, "-d", "json")
        set_fake(fake_addr, {"output_tokens": a.events})
        run(conn, gh_addr, 20, True)
        time.sleep(1)
        callgrind(gh.pid, "-z")
        run(conn, gh_addr, a.streams, True)
        time.sleep(0.5)
        callgrind(gh.pid, "-d", "stream")
        conn.close()
    finally:
        stop(gh, fake)
    dumps = sorted(f for f in os.listdir(out) if f.startswith("callgrind.out."))
    results = {}
    for f in dumps:
        path = os.path.join(out, f)
        with open(path) as fh:
            head = fh.read(4096)
        m = re.search(r"^desc: Trigger: (?:Client Request: |dump )?(\w+)", head, re.M)
        if m and m.group(1) in ("json", "stream"):
            phase = m.group(1)
            os.replace(path, os.path.join(out, f"callgrind.out.{phase}"))
            results[phase] = total_ir(os.path.join(out, f"callgrind.out.{phase}"))
    n = {"json": a.json, "stream": a.streams}
    for phase, ir in results.items():
        print(f"{phase}: {ir} Ir total, {ir / n[phase]:.0f} Ir per request")
    print(f"profiles in {out}")


if __name__ == "__main__":
    main()
