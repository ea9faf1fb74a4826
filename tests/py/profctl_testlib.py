"""What every Python test of profctl shares: starting processes and cleaning them up, starting an
agent on a free port (it writes --port-file once it listens: the event tests wait on, never a
fixed sleep), waiting for a condition while noticing a process that died, and failing with a
message that names what did not happen.

    from profctl_testlib import Failure, Processes, wait_for
    with Processes(work) as procs:
        port = procs.start_agent(agent_bin, "host-a", ["--collectors=cupti"])
        ...

Tests import it with `sys.path.insert(0, os.path.join(HERE, "py"))` (tests/py/).
"""

import os
import signal
import subprocess
import time

DEFAULT_TIMEOUT_S = 60
POLL_S = 0.02


class Failure(Exception):
    """A check that did not hold; its message says what was expected."""


def check(condition, message):
    if not condition:
        raise Failure(message)


class Processes:
    """The processes a test started, each with its output in WORK/NAME.log; all stopped (SIGTERM,
    then SIGKILL after `grace_s`) when the `with` block ends, whatever happened in it."""

    def __init__(self, work, grace_s=10):
        self.work = work
        self.grace_s = grace_s
        self.started = []  # (name, Popen), in start order

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop_all()
        return False

    def log_path(self, name):
        return os.path.join(self.work, name + ".log")

    def start(self, name, argv, env=None, cwd=None):
        """Starts argv with stdout and stderr in WORK/NAME.log."""
        with open(self.log_path(name), "w") as log:
            p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
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

    def start_agent(self, agent_bin, name, args=(), env=None, timeout_s=DEFAULT_TIMEOUT_S):
        """profctl-agent on a free loopback port: returns the port once the agent has written its
        --port-file (WORK/NAME.port), i.e. once it listens. Fails naming the agent when it exits
        first or writes nothing in `timeout_s`."""
        port_file = os.path.join(self.work, name + ".port")
        if os.path.exists(port_file):
            os.remove(port_file)  # a restarted agent: wait for the new one's file
        p = self.start(name, [agent_bin, "--port=0", "--bind=127.0.0.1",
                              f"--port-file={port_file}", *args], env=env)
        wait_for(f"{name}'s port file", lambda: _nonempty(port_file), [(name, p)],
                 timeout_s=timeout_s)
        return read_port(port_file)

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

    def stop_all(self):
        for _, p in self.started:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for name, p in self.started:
            try:
                p.wait(timeout=self.grace_s)
            except subprocess.TimeoutExpired:
                print(f"note: {name} ignored SIGTERM for {self.grace_s} s; killed")
                p.kill()
                p.wait()


def _nonempty(path):
    return os.path.exists(path) and os.path.getsize(path) > 0


def read_port(port_file):
    """The first port a --port-file lists."""
    with open(port_file) as f:
        return int(f.read().split()[0])


def wait_for(what, cond, procs=(), timeout_s=DEFAULT_TIMEOUT_S):
    """Polls cond() until it holds. Fails when `timeout_s` passes, or at once when one of `procs`
    ((name, Popen) pairs, or a Processes) exits meanwhile: a dead process will not make it hold."""
    watched = procs.started if isinstance(procs, Processes) else list(procs)
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return
        for name, p in watched:
            if p.poll() is not None:
                raise Failure(f"{name} exited with {p.returncode} while waiting for {what}")
        time.sleep(POLL_S)
    raise Failure(f"no {what} within {timeout_s} s")
