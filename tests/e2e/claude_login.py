"""Drives Claude Code's own `/login` to a Gatehouse through a pseudo-terminal.

Claude Code starts with user settings that force gateway sign-in; this script answers its
screens (theme, connect, trust the certificate, confirm the account) and reports progress
as JSON lines on stdout for the Rust test that runs it:

  {"code": "WDJB-MJHT"}   the user code shown; the test then signs in with a browser
  {"done": true}          Claude Code says it is connected
  {"error": "...", "screen": "..."} on timeout

Env: CLAUDE (the binary), CLAUDE_ENV_* (variables passed to Claude Code without the prefix),
TIMEOUT_SECS (default 90).
"""

import json
import os
import pty
import re
import select
import signal
import sys
import time

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Za-z0-9]|\x1b[=>]")
UP, ENTER = b"\x1b[A", b"\r"


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    claude = os.environ["CLAUDE"]
    env = {k[len("CLAUDE_ENV_"):]: v for k, v in os.environ.items() if k.startswith("CLAUDE_ENV_")}
    env.setdefault("TERM", "xterm-256color")
    deadline = time.time() + float(os.environ.get("TIMEOUT_SECS", "90"))
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(claude, [claude], env)
    screen = b""

    def flat():
        # Screens are drawn with cursor moves: compare without escapes and whitespace.
        return re.sub(rb"\s+", b"", ANSI.sub(b"", screen)).decode("utf-8", "replace")

    def wait_for(needle):
        nonlocal screen
        while time.time() < deadline:
            if needle in flat():
                return True
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                screen += chunk
        say({"error": f"timed out waiting for {needle!r}", "screen": flat()[-1500:]})
        return False

    def send(*keys):
        nonlocal screen
        screen = b""
        for k in keys:
            os.write(fd, k)
            time.sleep(0.3)

    try:
        steps = [
            ("Choosethetextstyle", (ENTER,)),
            ("Entertoconnect", (ENTER,)),
            ("Trustgateway", (UP, ENTER)),
        ]
        for needle, keys in steps:
            if not wait_for(needle):
                return 1
            send(*keys)
        if not wait_for("Code:"):
            return 1
        m = re.search(r"Code:([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})", flat())
        if not m:
            say({"error": "no user code on screen", "screen": flat()[-1500:]})
            return 1
        say({"code": m.group(1)})
        if not wait_for("SignedintoCloudgatewayas"):
            return 1
        send(UP, ENTER)
        if not wait_for("ConnectedtoCloudgateway"):
            return 1
        say({"done": True})
        return 0
    finally:
        try:
            os.kill(pid, signal.SIGTERM)
            time.sleep(0.5)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


if __name__ == "__main__":
    sys.exit(main())
