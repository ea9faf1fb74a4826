#!/usr/bin/env python3
"""Renders every Kustomize overlay under deploy/k8s and validates every object offline.

  k8s_check.py [--k8s-dir=deploy/k8s] [--out-dir=DIR]

Rendering: `kubectl kustomize` when kubectl is installed, and always also kustomize_lite (the
Python renderer of the subset we use); with both, the two must produce the same objects. Then
every object of every overlay (and of the base) is checked:

1. schema: the (apiVersion, kind) pair is one we use (no RBAC kinds at all) and the object
   validates against k8s_schema.py (closed schemas: misspelt fields fail);
2. references: volume mounts name defined volumes, no mount path twice; probes and Service
   targetPorts name declared container ports; $(VAR) in command/args is defined in env; Service
   selectors select some pod template; a Deployment's selector matches its template; ConfigMaps,
   Secrets (and their keys, items, subPaths) and PVCs referenced exist in the render, or are
   Secrets the overlay documents as created by hand (EXTERNAL_SECRETS below);
3. hardening: profctl's containers run as non-root with a read-only root file system, no
   privilege escalation, ALL capabilities dropped, CPU and memory limits; secret volumes are not
   readable by others (the agent refuses such token and key files);
4. the profctl wiring: the injection library's copy destination equals CUDA_INJECTION64_PATH and
   NVTX_INJECTION64_PATH, on a volume the trainer shares with the init container;
   PROFCTL_AGENT_SOCKET equals the agent's --inject-socket, on a volume shared with the agent;
   --port equals the agent's grpc containerPort and the headless Service's target; files named
   by --token-file/--tls-* lie on mounted Secret volumes whose Secret has that key; the
   coordinator's --config is the mounted ConfigMap key; every schedule in that coordinator.yaml
   targets the headless Service's DNS name (in the overlay's namespace) and port, and its logdir
   lies on the PVC.

Exit 0 when everything holds, 1 with one line per problem otherwise.
"""

import argparse
import base64
import os
import re
import shutil
import subprocess
import sys

import yaml

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_schema  # noqa: E402
import kustomize_lite  # noqa: E402

# Secrets an overlay expects to exist in the cluster (created by hand, never committed):
# name -> keys. The base and dev get profctl-token from a generator or the user.
EXTERNAL_SECRETS = {
    "base": {"profctl-token": {"token"}},
    "production": {"profctl-token": {"token"}, "profctl-tls": {"tls.crt", "tls.key", "ca.crt"}},
}
INJECT_LIB = "libprofctl_inject.so"


USE_KUBECTL = True  # --no-kubectl: render with kustomize_lite alone (as where kubectl is missing)


def kubectl_render(kdir):
    if not USE_KUBECTL:
        return None, None
    kubectl = shutil.which("kubectl")
    if kubectl:
        out = subprocess.run([kubectl, "kustomize", kdir], capture_output=True, text=True,
                             timeout=60)
        if out.returncode == 0:
            return [d for d in yaml.safe_load_all(out.stdout) if d], "kubectl kustomize"
        raise RuntimeError(f"kubectl kustomize {kdir} failed:\n{out.stderr}")
    kustomize = shutil.which("kustomize")
    if kustomize:
        out = subprocess.run([kustomize, "build", kdir], capture_output=True, text=True,
                             timeout=60, check=True)
        return [d for d in yaml.safe_load_all(out.stdout) if d], "kustomize build"
    return None, None


def key_of(o):
    return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])


def render(kdir, problems, label):
    """Both renderers; returns the objects (kubectl's when present)."""
    lite = kustomize_lite.render(kdir)
    real, how = kubectl_render(kdir)
    if real is None:
        print(f"{label}: rendered with kustomize_lite (kubectl "
              f"{'not installed' if USE_KUBECTL else 'not used: --no-kubectl'})")
        return lite
    a = {key_of(o): o for o in real}
    b = {key_of(o): o for o in lite}
    if set(a) != set(b):
        problems.append(f"{label}: {how} and kustomize_lite disagree on the objects: "
                        f"only {how}: {sorted(set(a) - set(b))}, only lite: "
                        f"{sorted(set(b) - set(a))}")
    for k in set(a) & set(b):
        if a[k] != b[k]:
            problems.append(f"{label}: {how} and kustomize_lite render {k} differently")
    print(f"{label}: rendered with {how} ({len(real)} objects); kustomize_lite agrees"
          if not any(p.startswith(label + ":") for p in problems) else
          f"{label}: rendered with {how}")
    return real


# ---- a tiny JSON-schema validator, for machines without python3-jsonschema ----------------------

def _mini_validate(inst, s, path, errs):
    t = s.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool}
    if t in types and not isinstance(inst, types[t]):
        errs.append(f"{path}: expected {t}")
        return
    if t in ("integer", "number") and (isinstance(inst, bool) or not isinstance(
            inst, int if t == "integer" else (int, float))):
        errs.append(f"{path}: expected {t}")
        return
    if "const" in s and inst != s["const"]:
        errs.append(f"{path}: must be {s['const']!r}")
    if "enum" in s and inst not in s["enum"]:
        errs.append(f"{path}: {inst!r} is not one of {s['enum']}")
    if isinstance(inst, str):
        if "pattern" in s and not re.search(s["pattern"], inst):
            errs.append(f"{path}: {inst!r} does not match {s['pattern']}")
        if len(inst) < s.get("minLength", 0) or len(inst) > s.get("maxLength", 1 << 30):
            errs.append(f"{path}: {inst!r} has a bad length")
    if isinstance(inst, (int, float)) and not isinstance(inst, bool):
        if inst < s.get("minimum", -1e300) or inst > s.get("maximum", 1e300):
            errs.append(f"{path}: {inst} out of range")
    if isinstance(inst, dict):
        for r in s.get("required", []):
            if r not in inst:
                errs.append(f"{path}: '{r}' is a required property")
        props = s.get("properties", {})
        for k, v in inst.items():
            if "propertyNames" in s:
                _mini_validate(k, s["propertyNames"], f"{path}.{k}", errs)
            if k in props:
                _mini_validate(v, props[k], f"{path}.{k}", errs)
            elif s.get("additionalProperties") is False:
                errs.append(f"{path}: unknown field '{k}'")
            elif isinstance(s.get("additionalProperties"), dict):
                _mini_validate(v, s["additionalProperties"], f"{path}.{k}", errs)
        if len(inst) < s.get("minProperties", 0) or len(inst) > s.get("maxProperties", 1 << 30):
            errs.append(f"{path}: wrong number of fields")
    if isinstance(inst, list):
        if len(inst) < s.get("minItems", 0):
            errs.append(f"{path}: too few items")
        for i, v in enumerate(inst):
            if "items" in s:
                _mini_validate(v, s["items"], f"{path}[{i}]", errs)
    for key, need in (("anyOf", lambda n: n >= 1), ("oneOf", lambda n: n == 1)):
        if key in s:
            ok = sum(1 for sub in s[key] if not _sub_errors(inst, sub, path))
            if not need(ok):
                errs.append(f"{path}: {inst!r} does not match {key} ({ok} alternatives match)")
    if "not" in s and not _sub_errors(inst, s["not"], path):
        errs.append(f"{path}: matches a forbidden shape")


def _sub_errors(inst, s, path):
    e = []
    _mini_validate(inst, s, path, e)
    return e


def schema_errors(o):
    s = k8s_schema.SCHEMAS.get((o.get("apiVersion"), o.get("kind")))
    if s is None:
        return [f"apiVersion/kind {o.get('apiVersion')}/{o.get('kind')} is not one profctl's "
                f"manifests use (known: {sorted(k8s_schema.SCHEMAS)}); no RBAC objects"]
    try:
        import jsonschema
        v = jsonschema.Draft7Validator(s)
        return [f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
                for e in v.iter_errors(o)]
    except ImportError:
        return _sub_errors(o, s, "<root>")


# ---- cross-references --------------------------------------------------------------------------

def pod_templates(o):
    if o["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
        yield o["spec"]["template"]


def all_containers(pod_spec):
    return (pod_spec.get("initContainers") or []) + (pod_spec.get("containers") or [])


def flag_values(args):
    out = {}
    for a in args or []:
        m = re.match(r"^--([a-z0-9-]+)=(.*)$", a)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def volume_for_path(container, path):
    """(mount, volume name, path inside the volume) of the mount holding `path`, longest wins."""
    best = None
    for m in container.get("volumeMounts") or []:
        mp = m["mountPath"].rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best[0]["mountPath"].rstrip("/")):
                best = (m, m["name"], path[len(mp):].lstrip("/"))
    return best


def secret_keys(objs, ns, name, external):
    for o in objs:
        if o["kind"] == "Secret" and o["metadata"]["name"] == name and \
                o["metadata"].get("namespace", "") == ns:
            return set((o.get("data") or {}).keys()) | set((o.get("stringData") or {}).keys())
    return external.get(name)


def configmap(objs, ns, name):
    for o in objs:
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == name and \
                o["metadata"].get("namespace", "") == ns:
            return o
    return None


def check_pod(o, tmpl, objs, external, problems):
    where = f"{o['kind']}/{o['metadata']['name']}"
    ns = o["metadata"].get("namespace", "")
    spec = tmpl["spec"]
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    if len(volumes) != len(spec.get("volumes") or []):
        problems.append(f"{where}: a volume name is used twice")
    used = set()
    names = [c["name"] for c in all_containers(spec)]
    if len(set(names)) != len(names):
        problems.append(f"{where}: a container name is used twice")
    pod_sc = spec.get("securityContext") or {}
    for c in all_containers(spec):
        cw = f"{where} container {c['name']}"
        paths = [m["mountPath"] for m in c.get("volumeMounts") or []]
        if len(set(paths)) != len(paths):
            problems.append(f"{cw}: a mountPath is used twice")
        for m in c.get("volumeMounts") or []:
            used.add(m["name"])
            v = volumes.get(m["name"])
            if v is None:
                problems.append(f"{cw}: volumeMount {m['name']} names no volume of the pod")
                continue
            if "subPath" in m and "configMap" in v:
                cm = configmap(objs, ns, v["configMap"]["name"])
                if cm is not None and m["subPath"] not in (cm.get("data") or {}):
                    problems.append(f"{cw}: subPath {m['subPath']} is no key of ConfigMap "
                                    f"{v['configMap']['name']}")
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports") or []}
        numbers = set(ports.values())
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            p = c.get(probe)
            if not p:
                continue
            for h in ("tcpSocket", "httpGet", "grpc"):
                if h in p:
                    port = p[h]["port"]
                    if (isinstance(port, str) and port not in ports) or \
                            (isinstance(port, int) and port not in numbers):
                        problems.append(f"{cw}: {probe} port {port} is not a declared "
                                        f"containerPort ({ports})")
        env_names = {e["name"] for e in c.get("env") or []}
        for text in (c.get("command") or []) + (c.get("args") or []):
            for var in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", text):
                if var not in env_names:
                    problems.append(f"{cw}: $({var}) in command/args is not in its env "
                                    f"(Kubernetes would pass it literally)")
        for e in c.get("env") or []:
            ref = (e.get("valueFrom") or {})
            if "configMapKeyRef" in ref:
                cm = configmap(objs, ns, ref["configMapKeyRef"]["name"])
                if cm is None or ref["configMapKeyRef"]["key"] not in (cm.get("data") or {}):
                    problems.append(f"{cw}: env {e['name']}: no ConfigMap key "
                                    f"{ref['configMapKeyRef']}")
            if "secretKeyRef" in ref:
                keys = secret_keys(objs, ns, ref["secretKeyRef"]["name"], external)
                if keys is None or ref["secretKeyRef"]["key"] not in keys:
                    problems.append(f"{cw}: env {e['name']}: no Secret key {ref['secretKeyRef']}")
        if c.get("restartPolicy") == "Always" and c not in (spec.get("initContainers") or []):
            problems.append(f"{cw}: restartPolicy is for init containers (native sidecars) only")
        if "profctl" in c["image"]:
            sc = c.get("securityContext") or {}
            if not (sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) and
                    sc.get("runAsUser", pod_sc.get("runAsUser", 0)) != 0):
                problems.append(f"{cw}: profctl containers must run as a non-root user")
            if sc.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{cw}: readOnlyRootFilesystem must be true")
            if sc.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{cw}: allowPrivilegeEscalation must be false")
            if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
                problems.append(f"{cw}: capabilities must drop ALL")
            limits = (c.get("resources") or {}).get("limits") or {}
            if "cpu" not in limits or "memory" not in limits:
                problems.append(f"{cw}: needs cpu and memory limits")
    for name, v in volumes.items():
        if name not in used:
            problems.append(f"{where}: volume {name} is mounted by no container")
        if "configMap" in v:
            cm = configmap(objs, ns, v["configMap"]["name"])
            if cm is None:
                problems.append(f"{where}: volume {name}: no ConfigMap {v['configMap']['name']}")
            else:
                for it in v["configMap"].get("items") or []:
                    if it["key"] not in (cm.get("data") or {}):
                        problems.append(f"{where}: volume {name}: no key {it['key']}")
        if "secret" in v:
            keys = secret_keys(objs, ns, v["secret"]["secretName"], external)
            if keys is None:
                problems.append(f"{where}: volume {name}: Secret {v['secret']['secretName']} is "
                                f"neither rendered nor documented as created by hand")
            mode = v["secret"].get("defaultMode", 0o644)
            if mode & 0o007:
                problems.append(f"{where}: volume {name}: defaultMode {oct(mode)} lets others "
                                f"read the secret (profctl refuses such token/key files)")
        if "persistentVolumeClaim" in v:
            claim = v["persistentVolumeClaim"]["claimName"]
            if not any(x["kind"] == "PersistentVolumeClaim" and x["metadata"]["name"] == claim
                       for x in objs):
                problems.append(f"{where}: volume {name}: no PersistentVolumeClaim {claim}")
    if o["kind"] == "Deployment":
        sel = o["spec"]["selector"].get("matchLabels") or {}
        labels = tmpl["metadata"].get("labels") or {}
        if not sel or any(labels.get(k) != v for k, v in sel.items()):
            problems.append(f"{where}: selector {sel} does not match the template's labels")


def check_file_flags(where, c, ns, spec, objs, external, problems):
    """--token-file, --tls-*, --config: on a mounted volume that has that key."""
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    for flag, path in flag_values(c.get("args")).items():
        if flag not in ("token-file", "tls-cert", "tls-key", "tls-ca", "config", "serve-token-file",
                        "serve-tls-cert", "serve-tls-key", "serve-tls-ca"):
            continue
        hit = volume_for_path(c, path)
        if hit is None:
            problems.append(f"{where}: --{flag}={path} lies on no mounted volume")
            continue
        mount, vname, rel = hit
        v = volumes.get(vname, {})
        key = mount.get("subPath") or rel
        if "secret" in v:
            keys = secret_keys(objs, ns, v["secret"]["secretName"], external) or set()
            if key not in keys:
                problems.append(f"{where}: --{flag}={path}: Secret {v['secret']['secretName']} "
                                f"has no key {key!r} (keys: {sorted(keys)})")
        elif "configMap" in v:
            cm = configmap(objs, ns, v["configMap"]["name"]) or {}
            if key not in (cm.get("data") or {}):
                problems.append(f"{where}: --{flag}={path}: ConfigMap has no key {key!r}")
        else:
            problems.append(f"{where}: --{flag}={path} is on volume {vname}, not a Secret or "
                            f"ConfigMap")


def env_of(c):
    return {e["name"]: e.get("value") for e in c.get("env") or []}


def check_profctl(objs, external, problems, label):
    agents = []  # (object, pod spec, container)
    for o in objs:
        for tmpl in pod_templates(o):
            spec = tmpl["spec"]
            ns = o["metadata"].get("namespace", "")
            conts = all_containers(spec)
            copier = next((c for c in spec.get("initContainers") or []
                           if c.get("restartPolicy") != "Always" and
                           any(INJECT_LIB in x for x in c.get("command") or [])), None)
            agent = next((c for c in conts if (c.get("command") or [""])[0].endswith(
                "profctl-agent")), None)
            coord = next((c for c in conts if (c.get("command") or [""])[0].endswith("/profctl")
                          and (c.get("args") or [""])[0] == "serve"), None)
            where = f"{label}: {o['kind']}/{o['metadata']['name']}"
            for c in (agent, coord):
                if c is not None:
                    check_file_flags(f"{where} container {c['name']}", c, ns, spec, objs,
                                     external, problems)
            if agent is not None:
                agents.append((o, tmpl, agent))
                check_sidecar(where, spec, copier, agent, problems)
            if coord is not None:
                check_coordinator(where, o, spec, coord, objs, problems)
    if not agents:
        problems.append(f"{label}: no pod runs profctl-agent")


def check_sidecar(where, spec, copier, agent, problems):
    if copier is None:
        problems.append(f"{where}: no init container copies {INJECT_LIB}")
        return
    cmd = copier["command"]
    dest = cmd[-1]
    if dest.endswith("/"):
        dest += INJECT_LIB
    copy_vol = volume_for_path(copier, dest)
    if copy_vol is None:
        problems.append(f"{where}: {copier['name']} copies to {dest}, on no mounted volume")
        return
    flags = flag_values(agent.get("args"))
    sock = flags.get("inject-socket")
    if sock is None:
        problems.append(f"{where}: the agent has no --inject-socket")
    port = flags.get("port", "6000")
    grpc_ports = [p["containerPort"] for p in agent.get("ports") or [] if p.get("name") == "grpc"]
    if grpc_ports != [int(port)]:
        problems.append(f"{where}: agent --port={port} but its grpc containerPort is {grpc_ports}")
    if not agent.get("readinessProbe"):
        problems.append(f"{where}: the agent has no readinessProbe")
    trainers = [c for c in spec.get("containers") or [] if "CUDA_INJECTION64_PATH" in env_of(c)]
    if not trainers:
        problems.append(f"{where}: no container sets CUDA_INJECTION64_PATH")
    for t in trainers:
        env = env_of(t)
        tw = f"{where} container {t['name']}"
        for var in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"):
            if env.get(var) is None:
                problems.append(f"{tw}: {var} is not set")
                continue
            hit = volume_for_path(t, env[var])
            if hit is None or hit[1] != copy_vol[1] or hit[2] != copy_vol[2]:
                problems.append(f"{tw}: {var}={env[var]} is not where {copier['name']} copies "
                                f"the library ({dest} on volume {copy_vol[1]})")
        if sock is not None:
            if env.get("PROFCTL_AGENT_SOCKET") != sock:
                problems.append(f"{tw}: PROFCTL_AGENT_SOCKET={env.get('PROFCTL_AGENT_SOCKET')} "
                                f"but the agent listens on --inject-socket={sock}")
            a, b = volume_for_path(agent, sock), volume_for_path(t, sock)
            if a is None or b is None or a[1] != b[1]:
                problems.append(f"{tw}: the socket {sock} is not on a volume that the agent and "
                                f"the trainer both mount")
            elif a[0].get("readOnly"):
                problems.append(f"{where}: the agent mounts the socket's volume read-only")


def check_coordinator(where, o, spec, coord, objs, problems):
    ns = o["metadata"].get("namespace", "") or "default"
    flags = flag_values(coord.get("args"))
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    hit = volume_for_path(coord, flags.get("config", ""))
    if hit is None or "configMap" not in volumes.get(hit[1], {}):
        problems.append(f"{where}: --config={flags.get('config')} is not a mounted ConfigMap")
        return
    mount, vname, rel = hit
    cm = configmap(objs, o["metadata"].get("namespace", ""), volumes[vname]["configMap"]["name"])
    text = (cm or {}).get("data", {}).get(mount.get("subPath") or rel)
    if text is None:
        return  # reported by check_file_flags
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as e:
        problems.append(f"{where}: coordinator.yaml is not YAML: {e}")
        return
    headless = {}
    for s in objs:
        if s["kind"] == "Service" and s["spec"].get("clusterIP") == "None":
            sns = s["metadata"].get("namespace", "") or "default"
            for p in s["spec"]["ports"]:
                headless.setdefault(f"{s['metadata']['name']}.{sns}.svc.cluster.local",
                                    set()).add(p["port"])
    logdir = config.get("logdir", "")
    lhit = volume_for_path(coord, logdir)
    if lhit is None or "persistentVolumeClaim" not in volumes.get(lhit[1], {}):
        problems.append(f"{where}: logdir {logdir} is not on the sessions PVC")
    if not config.get("schedules"):
        problems.append(f"{where}: coordinator.yaml has no schedules")
    for s in config.get("schedules") or []:
        targets = s.get("targets")
        if not isinstance(targets, str) or "/" in targets:
            continue  # a static list or a file: nothing to tie to the Service
        host, _, port = targets.rpartition(":")
        if host not in headless:
            problems.append(f"{where}: schedule {s.get('name')} targets {targets}, but the "
                            f"headless Services here are {sorted(headless)} (namespace {ns})")
        elif not port.isdigit() or int(port) not in headless[host]:
            problems.append(f"{where}: schedule {s.get('name')} targets port {port}, the "
                            f"Service {host} serves {sorted(headless[host])}")


def check_services(objs, problems, label):
    pods = []
    for o in objs:
        for tmpl in pod_templates(o):
            pods.append((o["metadata"].get("namespace", ""), tmpl))
    for s in objs:
        if s["kind"] != "Service":
            continue
        where = f"{label}: Service/{s['metadata']['name']}"
        sel = s["spec"].get("selector") or {}
        ns = s["metadata"].get("namespace", "")
        matched = [t for pns, t in pods if pns == ns and sel and all(
            (t["metadata"].get("labels") or {}).get(k) == v for k, v in sel.items())]
        if not matched:
            problems.append(f"{where}: selector {sel} selects no pod template")
            continue
        for p in s["spec"]["ports"]:
            tp = p.get("targetPort", p["port"])
            for t in matched:
                declared = [(cp.get("name"), cp["containerPort"]) for c in
                            all_containers(t["spec"]) for cp in c.get("ports") or []]
                if not any(tp == n or tp == num for n, num in declared):
                    problems.append(f"{where}: targetPort {tp} is declared by no container of "
                                    f"the selected pods ({declared})")


def check_objects(objs, external, label):
    problems = []
    seen = set()
    for o in objs:
        k = key_of(o)
        if k in seen:
            problems.append(f"{label}: {k} twice")
        seen.add(k)
        for e in schema_errors(o):
            problems.append(f"{label}: {o.get('kind')}/{o.get('metadata', {}).get('name')}: {e}")
    if problems:
        return problems  # the checks below assume well-formed objects
    for o in objs:
        if o["kind"] == "Secret":
            for key, val in (o.get("data") or {}).items():
                base64.b64decode(val, validate=True)
        for tmpl in pod_templates(o):
            check_pod(o, tmpl, objs, external, problems)
    problems = [f"{label}: {p}" for p in problems]
    check_services(objs, problems, label)
    check_profctl(objs, external, problems, label)
    return problems


def kustomizations(k8s_dir):
    dirs = [("base", os.path.join(k8s_dir, "base"))]
    overlays = os.path.join(k8s_dir, "overlays")
    for name in sorted(os.listdir(overlays)):
        if os.path.isfile(os.path.join(overlays, name, "kustomization.yaml")):
            dirs.append((name, os.path.join(overlays, name)))
    return dirs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--k8s-dir", default=os.path.join(os.path.dirname(__file__), "..", "k8s"))
    ap.add_argument("--out-dir", help="also write each rendering to DIR/<overlay>.yaml")
    ap.add_argument("--no-kubectl", action="store_true",
                    help="render with kustomize_lite only, as on a machine without kubectl")
    args = ap.parse_args()
    global USE_KUBECTL
    USE_KUBECTL = not args.no_kubectl
    problems = []
    count = 0
    for label, kdir in kustomizations(args.k8s_dir):
        try:
            objs = render(kdir, problems, label)
        except (RuntimeError, kustomize_lite.KustomizeError, subprocess.SubprocessError) as e:
            problems.append(f"{label}: cannot render: {e}")
            continue
        if args.out_dir:
            os.makedirs(args.out_dir, exist_ok=True)
            with open(os.path.join(args.out_dir, f"{label}.yaml"), "w") as f:
                yaml.safe_dump_all(objs, f, sort_keys=True)
        found = check_objects(objs, EXTERNAL_SECRETS.get(label, {}), label)
        problems += found
        count += len(objs)
        print(f"{label}: {len(objs)} objects, {len(found)} problems")
    for p in problems:
        print("PROBLEM:", p)
    print(f"k8s_check: {count} objects checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
