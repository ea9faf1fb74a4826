#!/usr/bin/env python3
"""Runs the rendered sidecar pod's containers as local processes and proves they agree.

  sidecar_wiring_test.py --agent=PATH --profctl=PATH [--inject-lib=PATH] [--overlay=dev ...]

For the base and each overlay, the trainer Job's pod template (rendered as k8s_check.py renders it)
is played out on this machine in a private network namespace (`unshare -n`, so the real ports
6000/9091/... are ours and nothing leaves loopback): every pod volume becomes a folder of a temp
dir (emptyDirs empty, Secrets and ConfigMaps written from the rendered objects, with their
defaultMode; Secrets an overlay expects to be created by hand are made here: a random token, and
for TLS a CA and one certificate as docs/deployment.md says), each container's mount paths map to
those folders, and the image's paths map to the build's binaries (/usr/bin/profctl-agent,
/usr/bin/profctl, /usr/lib/profctl/libprofctl_inject.so). Commands, args and env are taken as
rendered, with Kubernetes' $(VAR) expansion and the downward API (pod name, completion index)
filled in. Then:

1. the init container's own command (cp) puts the library where CUDA_INJECTION64_PATH and
   NVTX_INJECTION64_PATH (mapped) point, byte for byte;
2. the agent sidecar starts with the rendered args and its readinessProbe passes (it listens on
   the port the probe names, which must be the grpc containerPort);
3. `profctl ping` with the coordinator Deployment's own credential flags (--token-file, --tls-*,
   --tls-server-name, mapped into the coordinator pod's volumes) reaches the agent at that port
   and sees the agent named after the pod ($(POD_NAME)); with a wrong token it is refused;
4. PROFCTL_AGENT_SOCKET equals the agent's --inject-socket, and the agent has a Unix socket
   there that the trainer's environment can connect to;
5. where the trainer's command is a shell script (dev), it runs with its environment and finds
   the library; where the agent has --metrics-port, /metrics answers there;
6. if `profctl serve` exists, the coordinator container runs with its rendered args (config from
   the ConfigMap, sessions on the PVC folder) and its readinessProbe passes.

Flags the agent or profctl do not know yet (--inject-socket, --metrics-port, `serve`) and the
cupti collector on a machine without it are reported; the test then runs without them, and
exits 77 (skipped, CTest SKIP_RETURN_CODE) if everything else held, 1 if anything failed.
"""

import argparse
import base64
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "py"))
import k8s_check  # noqa: E402
from profctl_testlib import Failure, Processes, wait_for  # noqa: E402

SKIP = 77
POD_NAME = "trainer-0-wiring"
INDEX = "0"


class Env:
    """What the test learnt along the way."""

    def __init__(self):
        self.missing = []  # features the binaries lack: a skip if nothing else failed
        self.notes = []
        self.procs = None  # the current overlay's processes (profctl_testlib.Processes)


def log(msg):
    print(msg, flush=True)


def enter_netns():
    """Re-runs this script in a new network namespace with loopback up."""
    if os.environ.get("PROFCTL_WIRING_NETNS") == "1":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
        return None
    unshare = shutil.which("unshare")
    if unshare is None or shutil.which("ip") is None:
        return "unshare or ip (util-linux, iproute2) is missing"
    env = dict(os.environ, PROFCTL_WIRING_NETNS="1")
    for opts in (["-n"], ["-r", "-n"]):
        probe = subprocess.run([unshare] + opts + ["true"], capture_output=True, timeout=10)
        if probe.returncode == 0:
            child = [unshare] + opts + [sys.executable] + sys.argv
            return subprocess.run(child, env=env).returncode
    return "cannot create a network namespace here (unshare -n and unshare -rn failed)"


# ---- secrets an overlay expects to be created by hand ------------------------------------------

def make_external_secrets(names, workdir):
    out = {}
    if "profctl-token" in names:
        out["profctl-token"] = {"token": secrets.token_hex(32) + "\n"}
    if "profctl-tls" in names:
        openssl = shutil.which("openssl")
        if openssl is None:
            raise Failure("openssl is needed to make the TLS Secret (scripts/bootstrap.sh --test)")
        d = os.path.join(workdir, "pki")
        os.makedirs(d)

        def run(*args):
            subprocess.run([openssl] + list(args), cwd=d, check=True, capture_output=True,
                           timeout=60)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        run("req", "-x509", *ec, "-days", "2", "-keyout", "ca.key", "-out", "ca.crt",
            "-subj", "/CN=profctl-wiring-ca")
        run("req", *ec, "-keyout", "tls.key", "-out", "tls.csr", "-subj", "/CN=profctl-agents")
        with open(os.path.join(d, "ext"), "w") as f:
            f.write("subjectAltName=DNS:profctl-agents,DNS:profctl-coordinator\n"
                    "extendedKeyUsage=serverAuth,clientAuth\n")
        run("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext", "-out", "tls.crt")
        out["profctl-tls"] = {k: open(os.path.join(d, k)).read()
                              for k in ("tls.crt", "tls.key", "ca.crt")}
    return out


# ---- a pod, played out locally -----------------------------------------------------------------

class Pod:
    def __init__(self, obj, objs, external, root, image_map):
        self.obj = obj
        self.spec = obj["spec"]["template"]["spec"]
        self.ns = obj["metadata"].get("namespace", "")
        self.objs = objs
        self.image_map = image_map
        self.root = os.path.join(root, obj["metadata"]["name"])
        self.volumes = {}
        for v in self.spec.get("volumes") or []:
            path = os.path.join(self.root, "volumes", v["name"])
            os.makedirs(path)
            files, mode = {}, None
            if "secret" in v:
                files = self._secret(v["secret"]["secretName"], external)
                mode = v["secret"].get("defaultMode", 0o644)
            elif "configMap" in v:
                cm = k8s_check.configmap(objs, self.ns, v["configMap"]["name"])
                files = dict((cm or {}).get("data") or {})
                mode = v["configMap"].get("defaultMode", 0o644)
            for k, text in files.items():
                p = os.path.join(path, k)
                with open(p, "w") as f:
                    f.write(text)
                os.chmod(p, mode)
            self.volumes[v["name"]] = path

    def _secret(self, name, external):
        for o in self.objs:
            if o["kind"] == "Secret" and o["metadata"]["name"] == name:
                return {k: base64.b64decode(v).decode() for k, v in (o.get("data") or {}).items()}
        if name in external:
            return external[name]
        raise Failure(f"Secret {name} is neither rendered nor made by this test")

    def container(self, name):
        for c in k8s_check.all_containers(self.spec):
            if c["name"] == name:
                return c
        raise Failure(f"no container {name}")

    def mapper(self, c):
        """Maps a path inside container `c` to this machine."""
        mounts = []
        for m in c.get("volumeMounts") or []:
            host = self.volumes[m["name"]]
            if m.get("subPath"):
                host = os.path.join(host, m["subPath"])
            mounts.append((m["mountPath"].rstrip("/"), host))
        mounts += list(self.image_map.items())
        mounts.sort(key=lambda x: -len(x[0]))

        def map_path(p):
            for inside, host in mounts:
                if p == inside or p.startswith(inside + "/"):
                    return host + p[len(inside):]
            return p
        return map_path

    def env(self, c):
        """The container's env as Kubernetes gives it (unmapped)."""
        env = {}
        for e in c.get("env") or []:
            if "value" in e:
                env[e["name"]] = expand(e["value"], env)
                continue
            ref = e["valueFrom"]
            if "fieldRef" in ref:
                fp = ref["fieldRef"]["fieldPath"]
                env[e["name"]] = {"metadata.name": POD_NAME, "metadata.namespace": self.ns,
                                  "metadata.annotations['batch.kubernetes.io/job-completion-"
                                  "index']": INDEX}.get(fp, "")
            elif "secretKeyRef" in ref:
                r = ref["secretKeyRef"]
                env[e["name"]] = self._secret(r["name"], {})[r["key"]]
            elif "configMapKeyRef" in ref:
                r = ref["configMapKeyRef"]
                cm = k8s_check.configmap(self.objs, self.ns, r["name"])
                env[e["name"]] = cm["data"][r["key"]]
        return env

    def command(self, c, drop_flags=(), replace=None):
        """argv on this machine: $(VAR) expanded, paths mapped; flags in drop_flags left out."""
        env = self.env(c)
        m = self.mapper(c)
        argv = []
        for a in (c.get("command") or []) + (c.get("args") or []):
            a = expand(a, env)
            flag = re.match(r"^--([a-z0-9-]+)=(.*)$", a)
            if flag and flag.group(1) in drop_flags:
                continue
            if flag and replace and flag.group(1) in replace:
                a = f"--{flag.group(1)}={replace[flag.group(1)]}"
            elif flag and flag.group(2).startswith("/"):
                a = f"--{flag.group(1)}={m(flag.group(2))}"
            elif a.startswith("/"):
                a = m(a)
            argv.append(a)
        return argv

    def process_env(self, c):
        m = self.mapper(c)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.root}
        for k in ("ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"):  # sanitizer builds
            if k in os.environ:
                env[k] = os.environ[k]
        for k, v in self.env(c).items():
            env[k] = m(v) if v.startswith("/") else v
        return env

    def port(self, c, name_or_number):
        if isinstance(name_or_number, int):
            return name_or_number
        for p in c.get("ports") or []:
            if p.get("name") == name_or_number:
                return p["containerPort"]
        raise Failure(f"{c['name']}: no port named {name_or_number}")


def expand(text, env):
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda mm: env.get(mm.group(1), mm.group(0)), text)


def start(state, argv, env, name, workdir):
    """A container's process, its output in WORKDIR/NAME.log, in a process group of its own
    (whatever it starts is stopped with it)."""
    return state.procs.start(name, argv, env=env, cwd=workdir, group=True)


def stop_all(state):
    if state.procs is not None:
        state.procs.stop_all()


def probe_ok(pod, c, probe):
    if "tcpSocket" in probe:
        port = pod.port(c, probe["tcpSocket"]["port"])
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False
    if "httpGet" in probe:
        port = pod.port(c, probe["httpGet"]["port"])
        try:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}{probe['httpGet'].get('path', '/')}", timeout=2) as r:
                return 200 <= r.status < 400
        except OSError:
            return False
    raise Failure(f"{c['name']}: probe kind {sorted(probe)} is not played out here")


def wait_ready(state, pod, c, name, seconds=20):
    """Whether process NAME (container c) passes its readinessProbe: True once it does, False
    when it exits first; a Failure when neither happens within `seconds`."""
    probe = c.get("readinessProbe") or c.get("startupProbe")
    if probe is None:
        raise Failure(f"{c['name']}: no readinessProbe")
    p = state.procs.get(name)
    ready = []

    def settled():
        if p.poll() is not None:
            return True
        if probe_ok(pod, c, probe):
            ready.append(True)
            return True
        return False
    try:
        wait_for(f"{c['name']} readinessProbe {probe} passing", settled, timeout_s=seconds)
    except Failure as e:
        raise Failure(f"{e}; output:\n{state.procs.output(name)}") from None
    return bool(ready)


UNKNOWN_FLAG = re.compile(r"unknown flag --([a-z0-9-]+)")


def start_sidecar_agent(state, pod, agent, workdir):
    """Starts the sidecar as rendered; drops flags the binary does not know (noted)."""
    drop, replace = [], {}
    for _ in range(6):
        argv = pod.command(agent, drop_flags=drop, replace=replace)
        log("agent: " + " ".join(argv))
        p = start(state, argv, pod.process_env(agent), "agent", workdir)
        if wait_ready(state, pod, agent, "agent"):
            return p, drop
        out = state.procs.output("agent")
        m = UNKNOWN_FLAG.search(out)
        if m and m.group(1) not in drop:
            state.missing.append(f"profctl-agent does not know --{m.group(1)} yet ({out.strip()})")
            drop.append(m.group(1))
            continue
        if "cupti" in out and "collectors" not in replace:
            state.notes.append(f"the cupti collector cannot run here ({out.strip()}); the agent "
                               f"ran with --collectors=synthetic instead")
            if "unknown collector 'cupti'" in out:
                state.missing.append("profctl-agent has no cupti collector yet")
            replace["collectors"] = "synthetic"
            state.collectors = "synthetic"
            continue
        raise Failure(f"the agent exited ({p.returncode}) before it was ready:\n{out}")
    raise Failure("the agent did not start")


def replace_used(state):
    return getattr(state, "collectors", None)


def play(overlay, objs, args, workdir, state):
    state.collectors = None
    external = make_external_secrets(set(k8s_check.EXTERNAL_SECRETS.get(overlay, {})), workdir)
    image_map = {"/usr/bin/profctl-agent": args.agent, "/usr/bin/profctl": args.profctl,
                 "/usr/lib/profctl/libprofctl_inject.so": args.inject_lib}
    job = next(o for o in objs if o["kind"] == "Job")
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    pod = Pod(job, objs, external, workdir, image_map)
    spec = pod.spec

    # 1. Init containers in order: run-to-completion ones now, native sidecars kept running.
    agent = agent_proc = None
    dropped = []
    for c in spec.get("initContainers") or []:
        if c.get("restartPolicy") == "Always":
            agent = c
            agent_proc, dropped = start_sidecar_agent(state, pod, c, workdir)
            continue
        argv = pod.command(c)
        log(f"init {c['name']}: " + " ".join(argv))
        r = subprocess.run(argv, env=pod.process_env(c), cwd=workdir, capture_output=True,
                           text=True, timeout=30)
        if r.returncode != 0:
            raise Failure(f"init container {c['name']} failed ({r.returncode}): {r.stderr}")
    if agent is None:
        raise Failure("no native-sidecar agent in the Job's init containers")
    agent_flags = k8s_check.flag_values(agent.get("args"))

    # 2. The library where the trainer looks for it.
    trainer = next(c for c in spec["containers"] if "CUDA_INJECTION64_PATH" in pod.env(c))
    tenv = pod.process_env(trainer)
    with open(args.inject_lib, "rb") as f:
        lib = f.read()
    for var in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"):
        path = tenv.get(var)
        if not path or not os.path.isfile(path):
            raise Failure(f"trainer: {var}={pod.env(trainer).get(var)} (here {path}) is not a "
                          f"file after the init containers ran")
        with open(path, "rb") as f:
            if f.read() != lib:
                raise Failure(f"trainer: {var} points at a file that is not the library")
        log(f"ok: {var}={pod.env(trainer)[var]} holds the library the init container copied")

    # 3. The agent on its rendered port, reached with the coordinator's own credentials.
    grpc_port = pod.port(agent, "grpc")
    if str(grpc_port) != agent_flags.get("port", "6000"):
        raise Failure(f"agent --port={agent_flags.get('port')} but containerPort grpc={grpc_port}")
    log(f"ok: the agent's readinessProbe passes on port {grpc_port}")
    coord_pod = Pod(deployment, objs, external, workdir, image_map)
    coord = coord_pod.spec["containers"][0]
    cred_flags = ("token-file", "tls-ca", "tls-cert", "tls-key", "tls-server-name")
    creds = [a for a in coord_pod.command(coord)
             if re.match(r"^--([a-z-]+)=", a) and a[2:].split("=")[0] in cred_flags]
    ping = [args.profctl, "ping", f"--workers=127.0.0.1:{grpc_port}", "--timeout=5000"]
    r = subprocess.run(ping + creds, capture_output=True, text=True, timeout=30)
    log(f"profctl ping {' '.join(creds)}:\n{r.stdout}{r.stderr}")
    if r.returncode != 0 or POD_NAME not in r.stdout:
        raise Failure(f"profctl ping with the coordinator's credentials failed ({r.returncode}) "
                      f"or did not show the agent named {POD_NAME}")
    log(f"ok: profctl ping with the coordinator's {', '.join(c.split('=')[0] for c in creds)} "
        f"reaches the agent, named {POD_NAME}")
    wrong = os.path.join(workdir, "wrong-token")
    with open(wrong, "w") as f:
        f.write("x" * 40)
    os.chmod(wrong, 0o600)
    bad = [a if not a.startswith("--token-file=") else f"--token-file={wrong}" for a in creds]
    if not any(a.startswith("--token-file=") for a in creds):
        raise Failure("the coordinator has no --token-file")
    r = subprocess.run(ping + bad, capture_output=True, text=True, timeout=30)
    if r.returncode == 0 or "PERMISSION_DENIED" not in r.stdout + r.stderr:
        raise Failure(f"profctl ping with a wrong token was not refused:\n{r.stdout}{r.stderr}")
    log("ok: a wrong token is refused (PERMISSION_DENIED)")

    # 4. The inject socket.
    sock = agent_flags.get("inject-socket")
    rendered_env = pod.env(trainer)
    if rendered_env.get("PROFCTL_AGENT_SOCKET") != sock:
        raise Failure(f"PROFCTL_AGENT_SOCKET={rendered_env.get('PROFCTL_AGENT_SOCKET')} but the "
                      f"agent has --inject-socket={sock}")
    if pod.mapper(agent)(sock) != tenv["PROFCTL_AGENT_SOCKET"]:
        raise Failure(f"{sock} is a different file for the agent and the trainer")
    log(f"ok: PROFCTL_AGENT_SOCKET equals --inject-socket={sock}, the same file in both")
    collectors = (replace_used(state) or agent_flags.get("collectors", "synthetic")).split(",")
    if "inject-socket" not in dropped and "cupti" not in collectors:
        log("ok: no cupti collector here, so no socket is expected (the agent serves "
            "--inject-socket for the cupti collector)")
    elif "inject-socket" not in dropped:
        host = tenv["PROFCTL_AGENT_SOCKET"]
        try:
            wait_for(f"file at --inject-socket={sock}", lambda: os.path.exists(host),
                     state.procs.only(["agent"]), timeout_s=10)
        except Failure as e:
            raise Failure(f"the agent accepted --inject-socket={sock} but made no socket there "
                          f"({e})") from None
        if not stat.S_ISSOCK(os.stat(host).st_mode):
            raise Failure(f"the agent accepted --inject-socket={sock} but made no socket there")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(host)
        log("ok: the trainer's PROFCTL_AGENT_SOCKET accepts connections")
        # Here every process is one user; in the pod the trainer is another user whose only
        # link to the agent is the pod's fsGroup (a supplementary group of every container).
        mode = stat.S_IMODE(os.stat(host).st_mode)
        if mode & 0o060 != 0o060:
            state.missing.append(
                f"the agent makes its inject socket {oct(mode)}: a trainer running as another "
                f"user (group fsGroup {pod.spec.get('securityContext', {}).get('fsGroup')}) "
                f"cannot connect; it needs group read/write (0660), as does the systemd unit's "
                f"group profctl")
        else:
            log(f"ok: the socket is {oct(mode)}: the pod's fsGroup may connect")

    # 5. The trainer's own command, where it is a shell script; the agent's /metrics.
    tcmd = pod.command(trainer)
    if tcmd and tcmd[0] in ("sh", "bash", "/bin/sh", "/bin/bash") and shutil.which(tcmd[0]):
        tp = start(state, tcmd, tenv, "trainer", workdir)
        # The script says where it found the library once it has, then runs on; one that cannot
        # find it exits without a word.
        wait_for("line from the trainer's command, or its exit",
                 lambda: tp.poll() is not None or "\n" in state.procs.output("trainer"),
                 timeout_s=30)
        if tp.poll() not in (None, 0):
            raise Failure(f"the trainer's command failed ({tp.returncode}): "
                          f"{state.procs.output('trainer')}")
        log(f"ok: the trainer's own command runs with its env: "
            f"{state.procs.output('trainer').strip()}")
    if "metrics-port" in agent_flags and "metrics-port" not in dropped:
        mport = int(agent_flags["metrics-port"])
        if mport != pod.port(agent, "metrics"):
            raise Failure(f"--metrics-port={mport} is not the metrics containerPort")
        with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5) as resp:
            if resp.status != 200:
                raise Failure(f"agent /metrics answered {resp.status}")
        log(f"ok: the agent serves /metrics on {mport}")

    # 6. The coordinator daemon with its rendered args.
    help_out = subprocess.run([args.profctl, "--help"], capture_output=True, text=True, timeout=10)
    if not re.search(r"^\s+serve\s", help_out.stdout, re.M):
        state.missing.append("profctl has no 'serve' command yet: the coordinator Deployment's "
                             "command was not run")
        return
    cargv = coord_pod.command(coord)
    log("coordinator: " + " ".join(cargv))
    cp = start(state, cargv, coord_pod.process_env(coord), "coordinator", workdir)
    if not wait_ready(state, coord_pod, coord, "coordinator", seconds=30):
        out = state.procs.output("coordinator")
        m = UNKNOWN_FLAG.search(out)
        if m:
            state.missing.append(f"profctl serve does not know --{m.group(1)} yet")
            return
        raise Failure(f"profctl serve exited ({cp.returncode}):\n{out}")
    log("ok: profctl serve starts with the Deployment's args and its readinessProbe passes")
    # A caller of CoordinatorService with the same credentials, through the Service's name.
    svc = next(o for o in objs if o["kind"] == "Service" and
               o["spec"].get("selector", {}).items() <=
               deployment["spec"]["template"]["metadata"]["labels"].items())
    cport = coord_pod.port(coord, "grpc")
    caller = [a for a in creds if not a.startswith("--tls-server-name=")]
    if any(a.startswith("--tls-") for a in caller):
        caller.append(f"--tls-server-name={svc['metadata']['name']}")
    r = subprocess.run([args.profctl, "sessions", f"--coordinator=127.0.0.1:{cport}"] + caller,
                       capture_output=True, text=True, timeout=30)
    if "unknown command" in r.stderr:
        state.missing.append("profctl has no 'sessions' command yet")
        return
    if r.returncode != 0:
        raise Failure(f"profctl sessions --coordinator with the same credentials failed "
                      f"({r.returncode}):\n{r.stdout}{r.stderr}")
    log(f"ok: profctl sessions --coordinator=127.0.0.1:{cport} "
        f"{' '.join(a.split('=')[0] for a in caller)} is answered")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agent", required=True)
    ap.add_argument("--profctl", required=True)
    ap.add_argument("--inject-lib", help="libprofctl_inject.so (default: a stand-in file)")
    ap.add_argument("--k8s-dir", default=os.path.join(HERE, "..", "k8s"))
    ap.add_argument("--overlay", action="append", help="default: base, dev and production")
    ap.add_argument("--timeout", type=int, default=150)
    args = ap.parse_args()
    args.agent, args.profctl = os.path.abspath(args.agent), os.path.abspath(args.profctl)
    if args.inject_lib:
        args.inject_lib = os.path.abspath(args.inject_lib)
    for b in (args.agent, args.profctl):
        if not os.access(b, os.X_OK):
            print(f"FAIL: {b} is not an executable")
            return 1
    if args.inject_lib and not os.path.isfile(args.inject_lib):
        print(f"FAIL: {args.inject_lib} is not built (target profctl_inject): build every target "
              f"first")
        return 1
    why = enter_netns()
    if isinstance(why, int):
        return why
    if why:
        print(f"SKIPPED: {why}")
        return SKIP
    def on_alarm(*_):
        raise Failure(f"timed out after {args.timeout}s")
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(args.timeout)
    state = Env()
    workdir = tempfile.mkdtemp(prefix="profctl-wiring-")
    failed = []
    try:
        if not args.inject_lib:
            args.inject_lib = os.path.join(workdir, "libprofctl_inject.so")
            with open(args.inject_lib, "wb") as f:
                f.write(b"\x7fELF stand-in for libprofctl_inject.so\n")
            state.notes.append("no libprofctl_inject.so was built (target profctl_inject): the "
                               "init container copied a stand-in file")
        for overlay in args.overlay or ["base", "dev", "production"]:
            log(f"=== {overlay}")
            problems = []
            kdir = os.path.join(args.k8s_dir, *(["base"] if overlay == "base" else
                                                 ["overlays", overlay]))
            objs = k8s_check.render(kdir, problems, overlay)
            if problems:
                failed += problems
                continue
            odir = os.path.join(workdir, overlay)
            os.makedirs(odir)
            state.procs = Processes(odir, grace_s=5)
            try:
                play(overlay, objs, args, odir, state)
            except (Failure, subprocess.SubprocessError, OSError) as e:
                failed.append(f"{overlay}: {e}")
            finally:
                stop_all(state)
    finally:
        stop_all(state)
        signal.alarm(0)
        shutil.rmtree(workdir, ignore_errors=True)
    for n in state.notes:
        print("NOTE:", n)
    for m in dict.fromkeys(state.missing):
        print("NOT YET:", m)
    for f in failed:
        print("FAIL:", f)
    if failed:
        return 1
    if state.missing:
        print("SKIPPED: the wiring held, but the binaries lack the features listed above (NOT "
              "YET); the test passes once they exist")
        return SKIP
    print("PASS: the sidecar wiring holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
