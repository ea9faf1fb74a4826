"""What every Python test of profctl shares: starting processes and cleaning them up, starting an
agent on a free port (it writes --port-file once it listens: the event tests wait on, never a
fixed sleep), waiting for a condition or a log line while noticing a process that died, and
failing with a message that names what did not happen.

    from profctl_testlib import Failure, Processes, wait_for
    with Processes(work) as procs:
        port = procs.start_agent(agent_bin, "host-a", ["--collectors=cupti"])
        app = procs.start("app", [app_bin], env=...)
        procs.wait_line("host-a", f"pid {app.pid} .* registered", watch=["app"])
        wait_for("the app's ready file", lambda: os.path.exists(ready), procs)

Every wait has a deadline, and ends early with a Failure when a process it watches exits (its
`procs`: a Processes, or Processes.only(names)); the only fixed durations are ones that are
themselves what is asked for (`hold`: a program's time to settle), never a stand-in for an event.

A check run as a script shares its entry too: `check_parser` (argparse with the binaries it
runs) and `run_in_work_folder` (a temporary folder and a Processes on it; a Failure printed as
FAIL with every log's tail, exit 1; everything stopped and the folder removed at the end):

    def main():
        ap = check_parser(__doc__, binaries=("agent", "profctl", "app"))
        ap.add_argument("--keep")
        args = ap.parse_args()
        return run_in_work_folder("profctl-my-check-", lambda work, procs: run(args, work, procs),
                                  keep=args.keep)

Tests under tests/ import it with `sys.path.insert(0, os.path.join(HERE, "py"))`; scripts/ and
deploy/tests/ with the path of tests/py from the repository root. Standard library only: the
real-GPU check (scripts/gpu_verify.py) uses it on machines that have nothing else.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

DEFAULT_TIMEOUT_S = 60
POLL_S = 0.02


class Failure(Exception):
    """A check that did not hold; its message says what was expected."""


def check(condition, message):
    if not condition:
        raise Failure(message)


def check_parser(doc, binaries=("agent", "profctl")):
    """The ArgumentParser of a check run as a script: its description the first line of `doc`
    (the script's __doc__), a required --NAME=BIN for each of `binaries` (args.NAME)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    for name in binaries:
        ap.add_argument(f"--{name}", required=True, metavar="BIN")
    return ap


def run_in_work_folder(prefix, body, keep=None):
    """Runs body(work, procs) with WORK a new temporary folder (named from `prefix`) and procs a
    Processes logging there; returns body's exit code, or 1 when it raises a Failure, after
    printing "FAIL: " with the message and the tail of every log. Whatever happens, every process
    started is stopped and WORK removed; with `keep`, WORK is first copied there (everything but
    sockets: an agent SIGKILLed leaves its socket file behind)."""
    work = tempfile.mkdtemp(prefix=prefix)
    procs = Processes(work)
    try:
        return body(work, procs)
    except Failure as e:
        print(f"FAIL: {e}\n{procs.log_tails()}")
        return 1
    finally:
        procs.stop_all()
        if keep:
            shutil.copytree(work, keep, dirs_exist_ok=True,
                            ignore=lambda d, names: [n for n in names if n.endswith(".sock")])
        shutil.rmtree(work, ignore_errors=True)


class Processes:
    """The processes a test started, each with its output in WORK/NAME.log; all stopped (SIGTERM,
    then SIGKILL after `grace_s`) when the `with` block ends, whatever happened in it."""

    def __init__(self, work, grace_s=10):
        self.work = work
        self.grace_s = grace_s
        self.started = []  # (name, Popen), in start order
        self._groups = set()  # pids started in a process group of their own
        self._logs = {}  # name -> [byte offset read, unread complete lines], for wait_line

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop_all()
        return False

    def log_path(self, name):
        return os.path.join(self.work, name + ".log")

    def start(self, name, argv, env=None, cwd=None, group=False):
        """Starts argv with stdout and stderr in WORK/NAME.log (a restart under the same name
        starts a new log). With `group`, in a new session and process group, which is what gets
        the signals when it is stopped: whatever it started goes too, even after it exited."""
        with open(self.log_path(name), "w") as log:
            p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                 start_new_session=group)
        if group:
            self._groups.add(p.pid)
        self._logs[name] = [0, []]
        self.started.append((name, p))
        return p

    def track(self, name, popen):
        """Adds a process started elsewhere (e.g. with a pipe) to the ones stopped at the end."""
        self.started.append((name, popen))
        return popen

    def get(self, name):
        """The last process started as `name`."""
        for n, p in reversed(self.started):
            if n == name:
                return p
        raise KeyError(name)

    def start_agent(self, agent_bin, name, args=(), env=None, port=0,
                    timeout_s=DEFAULT_TIMEOUT_S):
        """profctl-agent on loopback, on `port` (0: a free one): returns the port once the agent
        has written its --port-file (WORK/NAME.port), i.e. once it listens. Fails naming the
        agent when it exits first or writes nothing in `timeout_s`."""
        port_file = os.path.join(self.work, name + ".port")
        if os.path.exists(port_file):
            os.remove(port_file)  # a restarted agent: wait for the new one's file
        self.start(name, [agent_bin, f"--port={port}", "--bind=127.0.0.1",
                          f"--port-file={port_file}", *args], env=env)
        wait_for(f"{name}'s port file", lambda: _nonempty(port_file), self.only([name]),
                 timeout_s=timeout_s)
        return read_port(port_file)

    def only(self, names):
        """(name, Popen) of the latest process of each of `names`: the `procs` of a wait that
        must end when one of those exits (a Processes itself watches every process)."""
        return _Watch([(n, self.get(n)) for n in names], self)

    def output(self, name):
        """Everything NAME has printed so far."""
        with open(self.log_path(name), errors="replace") as f:
            return f.read()

    def new_lines(self, name):
        """The lines NAME printed since the last new_lines or wait_line on it (a line still
        being written is left for the next call, unless the process has exited)."""
        self._read(name)
        lines = self._logs[name][1]
        self._logs[name][1] = []
        return lines

    def wait_line(self, name, pattern, timeout_s=DEFAULT_TIMEOUT_S, watch=()):
        """The re.Match of the first line NAME prints (after the lines new_lines and wait_line
        already went through) that matches `pattern`. Fails when `timeout_s` passes, or as soon
        as NAME or one of the processes named in `watch` exits without it."""
        rx = re.compile(pattern)
        found = []

        def matched():
            self._read(name)
            pending = self._logs[name][1]
            while pending:
                m = rx.search(pending.pop(0))
                if m:
                    found.append(m)
                    return True
            return False
        wait_for(f"{name} line matching '{pattern}'", matched,
                 self.only([name, *watch]), timeout_s=timeout_s)
        return found[0]

    def _read(self, name):
        state = self._logs.setdefault(name, [0, []])
        exited = self.get(name).poll() is not None
        with open(self.log_path(name), "rb") as f:
            f.seek(state[0])
            data = f.read()
        end = len(data) if exited else data.rfind(b"\n") + 1
        state[0] += end
        state[1] += data[:end].decode("utf-8", errors="replace").splitlines()

    def exited(self, names=None):
        """(name, return code) of each process (of `names`, or all) that has exited."""
        return [(n, p.returncode) for n, p in self.started
                if (names is None or n in names) and p.poll() is not None]

    def log_tails(self, lines=15):
        """The last lines of every log, for a failure report."""
        out = []
        for name, _ in self.started:
            path = self.log_path(name)
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    out.append(f"--- {name}.log (last lines)\n" + "".join(f.readlines()[-lines:]))
        return "\n".join(out)

    def stop(self, name, sig=signal.SIGTERM):
        """Stops the latest NAME (`sig`, then SIGKILL after grace_s); returns its exit code."""
        p = self.get(name)
        self._signal(p, sig)
        return self._reap(name, p)

    def stop_all(self):
        for _, p in self.started:
            self._signal(p, signal.SIGTERM)
        for name, p in self.started:
            self._reap(name, p)

    def _signal(self, p, sig):
        if p.pid in self._groups:
            # Its group, even when the leader is gone: what it left behind keeps the group id
            # (which no new process can take while the group has a member).
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass  # nothing left of it
        elif p.poll() is None:
            p.send_signal(sig)

    def _reap(self, name, p):
        try:
            p.wait(timeout=self.grace_s)
        except subprocess.TimeoutExpired:
            print(f"note: {name} ignored its signal for {self.grace_s} s; killed")
            self._signal(p, signal.SIGKILL)
            p.wait()
        self._groups.discard(p.pid)  # reaped: once its group is empty, the id may be reused
        return p.returncode


class _Watch(list):
    """(name, Popen) pairs that know the Processes whose logs they are."""

    def __init__(self, pairs, procs):
        super().__init__(pairs)
        self.procs = procs


def _nonempty(path):
    return os.path.exists(path) and os.path.getsize(path) > 0


def read_port(port_file):
    """The first port a --port-file lists."""
    with open(port_file) as f:
        return int(f.read().split()[0])


def _watched(procs):
    """(name, Popen, log path or None) of what a wait watches."""
    owner = procs if isinstance(procs, Processes) else getattr(procs, "procs", None)
    pairs = procs.started if isinstance(procs, Processes) else list(procs)
    return [(n, p, owner.log_path(n) if owner else None) for n, p in pairs]


def _died(name, p, log, during):
    where = ""
    if log and os.path.exists(log):
        with open(log, errors="replace") as f:
            last = " | ".join(ln.strip() for ln in f.readlines()[-3:] if ln.strip())
        where = f": {last} (log: {log})" if last else f" (log: {log})"
    return Failure(f"{name} exited ({p.returncode}) {during}{where}")


def wait_for(what, cond, procs=(), timeout_s=DEFAULT_TIMEOUT_S):
    """Polls cond() until it holds. Fails when `timeout_s` passes, or at once when one of `procs`
    ((name, Popen) pairs, a Processes, or Processes.only(names)) has exited and cond() still
    does not hold: a dead process will not make it hold."""
    watched = _watched(procs)
    end = time.monotonic() + timeout_s
    while True:
        if cond():
            return
        for name, p, log in watched:
            if p.poll() is not None and not cond():  # not what it did just before it exited
                raise _died(name, p, log, f"while waiting for {what}")
        if time.monotonic() >= end:
            raise Failure(f"no {what} within {timeout_s:g} s")
        time.sleep(POLL_S)


def hold(what, seconds, procs):
    """Lets `seconds` pass (a stated duration: a program's time to settle, a freeze), failing at
    once when one of `procs` (as for wait_for) exits meanwhile."""
    watched = _watched(procs)
    end = time.monotonic() + seconds
    while True:
        for name, p, log in watched:
            if p.poll() is not None:
                raise _died(name, p, log, f"during {what}")
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(POLL_S, left))
