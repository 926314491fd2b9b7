"""Runs the real Claude Code interactively in a pseudo-terminal and reads its footer.

Claude Code starts in PROJECT (its first-run screens already answered in its config
directory by the caller), a prompt is typed, and once the answer is on screen the driver
watches the footer for Claude Code's status line (the `statusLine` command's first line).
Output is JSON lines on stdout for the Rust test that runs it (see
tests/tests/integration/claude_statusline.rs):

  {"statusline": "...", "phase": "start"}  the footer's line, each time it changes
  {"ready": true}                          the prompt box is up; the prompt was typed
  {"answered": true}                       the answer is on screen
  {"nudged": true}                         no session figure after NUDGE_SECS: asked again
  {"statusline": "$0.01 this session · …", "phase": "answered"}
  {"screen": "..."}                        the screen when the driver stops (for the report)
  {"error": "...", "screen": "..."}        on timeout, or no footer matched STATUS_RE

After the answer it keeps reporting the footer until its stdin has a line or is closed (or
WATCH_SECS pass), then quits Claude Code (Ctrl-C twice, then signals) and exits 0 when a
footer line matched STATUS_RE.

The screen is kept by a small VT100 emulator (cursor moves, erases, scrolling), so the
status line is reported as a person sees it, not as a run of escape sequences.

Env: CLAUDE (the binary), PROJECT (its working directory), PROMPT, CLAUDE_ENV_* (Claude
Code's whole environment, without the prefix), STATUS_RE (what Gatehouse's line looks like),
ANSWER (text of the answer),
TIMEOUT_SECS (default 120), WATCH_SECS (default 60), NUDGE_SECS (default 15).
"""

import codecs
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import time
import unicodedata

ROWS, COLS = 40, 120
ENTER, CTRL_C = b"\r", b"\x03"


def say(obj):
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


class Screen:
    """Enough of a VT100/xterm to follow what Claude Code's renderer draws."""

    SEQ = re.compile(
        r"\x1b\[([?>=!]?)([0-9;:]*)([ -/]*)([@-~])"  # CSI
        r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC
        r"|\x1b[PX^_][^\x1b]*\x1b\\"  # DCS, SOS, PM, APC
        r"|\x1b[()*+#%][0-9A-Za-z@]"  # charsets, line sizes
        r"|\x1b[0-9A-Za-z=><@\\]"  # two-byte escapes
    )
    # An escape that may still be arriving: kept until the next read.
    PARTIAL = re.compile(r"\x1b(\[[?>=!]?[0-9;:]*[ -/]*|\][^\x07\x1b]*|\]?[^\x07]*\x1b|[PX^_][^\x1b]*|[()*+#%])?\Z")

    def __init__(self, rows, cols):
        self.rows, self.cols = rows, cols
        self.grid = [[" "] * cols for _ in range(rows)]
        self.x = self.y = 0
        self.top, self.bottom = 0, rows - 1
        self.saved = (0, 0)
        self.pending = ""
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data):
        text = self.pending + self.decoder.decode(data)
        m = self.PARTIAL.search(text)
        if m and m.start() < len(text):
            text, self.pending = text[: m.start()], text[m.start():]
        else:
            self.pending = ""
        pos = 0
        for m in self.SEQ.finditer(text):
            self.text(text[pos: m.start()])
            if m.group(4):
                self.csi(m.group(1), m.group(2), m.group(3), m.group(4))
            else:
                self.esc(m.group(0))
            pos = m.end()
        self.text(text[pos:])

    def lines(self):
        return ["".join(c for c in row if c is not None).rstrip() for row in self.grid]

    def dump(self):
        return "\n".join(self.lines()).rstrip()

    # -- drawing ---------------------------------------------------------------

    def scroll_up(self, n=1):
        for _ in range(n):
            del self.grid[self.top]
            self.grid.insert(self.bottom, [" "] * self.cols)

    def scroll_down(self, n=1):
        for _ in range(n):
            del self.grid[self.bottom]
            self.grid.insert(self.top, [" "] * self.cols)

    def linefeed(self):
        if self.y == self.bottom:
            self.scroll_up()
        elif self.y < self.rows - 1:
            self.y += 1

    def text(self, s):
        for ch in s:
            if ch == "\r":
                self.x = 0
            elif ch in "\n\x0b\x0c":
                self.linefeed()
            elif ch == "\b":
                self.x = max(0, self.x - 1)
            elif ch == "\t":
                self.x = min(self.cols - 1, (self.x // 8 + 1) * 8)
            elif ch < " " or ch == "\x7f":
                continue
            elif unicodedata.combining(ch) or ch in "\u200d\ufe0f":
                continue
            else:
                width = 2 if unicodedata.east_asian_width(ch) in "WF" else 1
                if self.x + width > self.cols:
                    self.x = 0
                    self.linefeed()
                self.grid[self.y][self.x] = ch
                if width == 2:
                    self.grid[self.y][self.x + 1] = None
                self.x += width

    def erase(self, y, x0, x1):
        for x in range(max(0, x0), min(self.cols, x1)):
            self.grid[y][x] = " "

    def esc(self, seq):
        if seq == "\x1b7":
            self.saved = (self.x, self.y)
        elif seq == "\x1b8":
            self.x, self.y = self.saved
        elif seq == "\x1bM":
            if self.y == self.top:
                self.scroll_down()
            else:
                self.y = max(0, self.y - 1)
        elif seq == "\x1bD":
            self.linefeed()
        elif seq == "\x1bE":
            self.x = 0
            self.linefeed()
        elif seq == "\x1bc":
            self.__init__(self.rows, self.cols)

    def csi(self, private, params, _inter, final):
        args = [int(p) if p.isdigit() else 0 for p in params.replace(":", ";").split(";")] if params else []
        n = args[0] if args and args[0] else 1
        clamp_y = lambda y: max(0, min(self.rows - 1, y))  # noqa: E731
        clamp_x = lambda x: max(0, min(self.cols - 1, x))  # noqa: E731
        if private == "?":
            if final in "hl" and any(a in (47, 1047, 1049) for a in args):
                self.grid = [[" "] * self.cols for _ in range(self.rows)]
            return
        if private:
            return
        if final == "A":
            self.y = clamp_y(self.y - n)
        elif final in "Be":
            self.y = clamp_y(self.y + n)
        elif final in "Ca":
            self.x = clamp_x(self.x + n)
        elif final == "D":
            self.x = clamp_x(min(self.x, self.cols - 1) - n)
        elif final == "E":
            self.x, self.y = 0, clamp_y(self.y + n)
        elif final == "F":
            self.x, self.y = 0, clamp_y(self.y - n)
        elif final in "G`":
            self.x = clamp_x(n - 1)
        elif final == "d":
            self.y = clamp_y(n - 1)
        elif final in "Hf":
            row = args[0] if args and args[0] else 1
            col = args[1] if len(args) > 1 and args[1] else 1
            self.y, self.x = clamp_y(row - 1), clamp_x(col - 1)
        elif final == "J":
            mode = args[0] if args else 0
            if mode == 0:
                self.erase(self.y, self.x, self.cols)
                for y in range(self.y + 1, self.rows):
                    self.erase(y, 0, self.cols)
            elif mode == 1:
                self.erase(self.y, 0, self.x + 1)
                for y in range(0, self.y):
                    self.erase(y, 0, self.cols)
            else:
                for y in range(self.rows):
                    self.erase(y, 0, self.cols)
        elif final == "K":
            mode = args[0] if args else 0
            if mode == 0:
                self.erase(self.y, self.x, self.cols)
            elif mode == 1:
                self.erase(self.y, 0, self.x + 1)
            else:
                self.erase(self.y, 0, self.cols)
        elif final == "X":
            self.erase(self.y, self.x, self.x + n)
        elif final == "P":
            row = self.grid[self.y]
            del row[self.x: self.x + n]
            row.extend([" "] * (self.cols - len(row)))
        elif final == "@":
            row = self.grid[self.y]
            row[self.x: self.x] = [" "] * n
            del row[self.cols:]
        elif final == "L" and self.top <= self.y <= self.bottom:
            for _ in range(n):
                del self.grid[self.bottom]
                self.grid.insert(self.y, [" "] * self.cols)
        elif final == "M" and self.top <= self.y <= self.bottom:
            for _ in range(n):
                del self.grid[self.y]
                self.grid.insert(self.bottom, [" "] * self.cols)
        elif final == "S":
            self.scroll_up(n)
        elif final == "T":
            self.scroll_down(n)
        elif final == "r":
            top = args[0] if args and args[0] else 1
            bottom = args[1] if len(args) > 1 and args[1] else self.rows
            self.top, self.bottom = clamp_y(top - 1), clamp_y(bottom - 1)
            self.x = self.y = 0
        elif final == "s":
            self.saved = (self.x, self.y)
        elif final == "u":
            self.x, self.y = self.saved


def footer(lines):
    """The status line: the first line drawn below the prompt box's bottom rule."""
    rules = [i for i, line in enumerate(lines) if len(line) > 10 and set(line) == {"─"}]
    if not rules:
        return None
    return next((line.strip() for line in lines[rules[-1] + 1:] if line.strip()), None)


def main():
    claude = os.environ["CLAUDE"]
    project = os.environ["PROJECT"]
    prompt = os.environ.get("PROMPT", "Say hello").encode()
    status_re = re.compile(os.environ.get("STATUS_RE", r"\$\d+\.\d\d this session.*"))
    env = {k[len("CLAUDE_ENV_"):]: v for k, v in os.environ.items() if k.startswith("CLAUDE_ENV_")}
    env.setdefault("TERM", "xterm-256color")
    env["COLUMNS"], env["LINES"] = str(COLS), str(ROWS)
    deadline = time.time() + float(os.environ.get("TIMEOUT_SECS", "120"))
    watch = float(os.environ.get("WATCH_SECS", "60"))

    pid, fd = pty.fork()
    if pid == 0:
        # The terminal's size, set before Claude Code first asks for it.
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        os.chdir(project)
        os.execve(claude, [claude], env)
    screen = Screen(ROWS, COLS)
    alive = True

    def pump(seconds):
        """Reads what Claude Code draws for up to `seconds`; False once it has exited."""
        nonlocal alive
        end = time.time() + seconds
        while alive:
            left = end - time.time()
            if left <= 0:
                break
            ready, _, _ = select.select([fd], [], [], min(left, 0.1))
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                alive = False
                break
            screen.feed(chunk)
        return alive

    seen = []

    def watch_footer(phase):
        """Reports the footer's line when it changed; returns it."""
        line = footer(screen.lines())
        if line and (not seen or seen[-1] != line):
            seen.append(line)
            say({"statusline": line, "phase": phase})
        return line

    def until(what, found, phase):
        while time.time() < deadline:
            watch_footer(phase)
            if found(screen.lines()):
                return True
            if not pump(0.2):
                break
        say({"error": f"timed out waiting for {what}", "screen": screen.dump()})
        return False

    try:
        # The prompt box: Claude Code's input line starts with its prompt character.
        prompt_box = re.compile(r"^[│ ]*[>❯](\s|$)")
        if not until("the prompt box", lambda ls: any(prompt_box.match(x) for x in ls), "start"):
            return 1
        pump(1.0)
        os.write(fd, prompt)
        pump(0.5)
        os.write(fd, ENTER)
        say({"ready": True})
        answer = os.environ.get("ANSWER", "Hello from the fake upstream")
        if not until("the answer", lambda ls: any(answer in x for x in ls), "start"):
            return 1
        say({"answered": True})
        matched = False
        stop = min(time.time() + watch, deadline)
        nudge = time.time() + float(os.environ.get("NUDGE_SECS", "15"))
        while time.time() < stop:
            line = watch_footer("answered")
            matched = matched or bool(line and status_re.fullmatch(line))
            if not matched and nudge and time.time() > nudge:
                # Claude Code runs the command 300 ms after a message; had the usage not
                # been stored by then the line has no session yet, and only another
                # message refreshes it: ask once more.
                nudge = None
                os.write(fd, prompt)
                pump(0.5)
                os.write(fd, ENTER)
                say({"nudged": True})
            if select.select([sys.stdin], [], [], 0)[0]:
                break
            if not pump(0.2):
                break
        if not matched:
            say({"error": "no Gatehouse status line in the footer", "screen": screen.dump()})
            return 1
        say({"screen": screen.dump()})
        return 0
    finally:
        for key in (CTRL_C, CTRL_C):
            try:
                os.write(fd, key)
            except OSError:
                pass
            pump(0.5)
        try:
            os.kill(pid, signal.SIGTERM)
            time.sleep(0.3)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


if __name__ == "__main__":
    sys.exit(main())
