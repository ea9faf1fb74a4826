#!/usr/bin/env python3
"""Proves that k8s_check.py catches what it claims to: each case breaks one thing in the rendered
dev and production overlays and requires a problem mentioning it (and the unbroken renderings to
have none). Runs every case with python3-jsonschema and again with k8s_check's own small
validator. Also checks kustomize_lite's strategic merge and hash on small inputs."""

import copy
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import k8s_check  # noqa: E402
import kustomize_lite  # noqa: E402


def find(objs, kind):
    return next(o for o in objs if o["kind"] == kind)


def pod(objs, kind="Job"):
    return find(objs, kind)["spec"]["template"]["spec"]


def agent(objs):
    return next(c for c in pod(objs)["initContainers"] if c["name"] == "profctl-agent")


def trainer(objs):
    return pod(objs)["containers"][0]


def env(c, name):
    return next(e for e in c["env"] if e["name"] == name)


def set_arg(c, flag, value):
    c["args"] = [f"--{flag}={value}" if a.startswith(f"--{flag}=") else a for a in c["args"]]


def coordinator_yaml(objs):
    cm = find(objs, "ConfigMap")
    return cm["data"], "coordinator.yaml"


def retarget(objs):
    data, key = coordinator_yaml(objs)
    data[key] = data[key].replace(".svc.cluster.local:6000", ".svc.cluster.local:7000")


def rename_ns(objs):
    data, key = coordinator_yaml(objs)
    data[key] = data[key].replace("profctl-agents.", "trainers.")


CASES = [
    # (what, mutation, text the problem must contain)
    ("misspelt probe field", lambda o: agent(o).update(readinesProbe=agent(o).pop(
        "readinessProbe")), "readinesProbe"),
    ("RBAC object", lambda o: o.append({"apiVersion": "rbac.authorization.k8s.io/v1",
                                        "kind": "Role", "metadata": {"name": "x"}}), "RBAC"),
    ("bad port name", lambda o: agent(o)["ports"][-1].update(name="GRPC_Port"), "GRPC_Port"),
    ("socket env differs", lambda o: env(trainer(o), "PROFCTL_AGENT_SOCKET").update(
        value="/tmp/agent.sock"), "PROFCTL_AGENT_SOCKET"),
    ("library path differs", lambda o: env(trainer(o), "CUDA_INJECTION64_PATH").update(
        value="/profctl/lib/libprofctl_inject.so"), "CUDA_INJECTION64_PATH"),
    ("NVTX unset", lambda o: trainer(o)["env"].remove(env(trainer(o), "NVTX_INJECTION64_PATH")),
     "NVTX_INJECTION64_PATH"),
    ("mount of no volume", lambda o: agent(o)["volumeMounts"].append(
        {"name": "nope", "mountPath": "/nope"}), "nope"),
    ("probe on undeclared port", lambda o: agent(o)["readinessProbe"]["tcpSocket"].update(
        port="admin"), "admin"),
    ("agent port differs", lambda o: set_arg(agent(o), "port", "6001"), "--port=6001"),
    ("service selects nothing", lambda o: find(o, "Service")["spec"]["selector"].update(
        {"profctl.dev/agent": "no"}), "selects no pod"),
    ("target port undeclared", lambda o: find(o, "Service")["spec"]["ports"][0].update(
        targetPort="grpcx"), "grpcx"),
    ("schedule on another port", retarget, "targets port 7000"),
    ("schedule on another Service", rename_ns, "trainers."),
    ("world-readable secret", lambda o: next(v for v in pod(o)["volumes"]
                                             if v["name"] == "profctl-token")["secret"].update(
        defaultMode=0o644), "others read"),
    ("token key missing", lambda o: set_arg(agent(o), "token-file", "/etc/profctl/token/tok"),
     "no key 'tok'"),
    ("undefined $(VAR)", lambda o: set_arg(agent(o), "name", "$(HOSTNAME)"), "$(HOSTNAME)"),
    ("writable root fs", lambda o: agent(o)["securityContext"].update(
        readOnlyRootFilesystem=False), "readOnlyRootFilesystem"),
    ("root user", lambda o: agent(o)["securityContext"].update(runAsUser=0), "non-root"),
    ("no limits", lambda o: agent(o)["resources"].pop("limits"), "limits"),
    ("no copy", lambda o: pod(o)["initContainers"].pop(0), "copies libprofctl_inject.so"),
    ("logdir off the PVC", lambda o: coordinator_yaml(o)[0].update({"coordinator.yaml": (
        coordinator_yaml(o)[0]["coordinator.yaml"].replace("/var/lib/profctl/sessions",
                                                           "/tmp/sessions"))}), "logdir"),
    ("config subPath missing", lambda o: next(
        m for m in pod(o, "Deployment")["containers"][0]["volumeMounts"]
        if m["name"] == "config").update(subPath="coord.yaml"), "coord.yaml"),
    ("deployment selector", lambda o: find(o, "Deployment")["spec"]["selector"][
        "matchLabels"].update(app="x"), "selector"),
    ("quantity", lambda o: agent(o)["resources"]["limits"].update(memory="1 GB"), "1 GB"),
]


def check(objs, overlay):
    return k8s_check.check_objects(objs, k8s_check.EXTERNAL_SECRETS.get(overlay, {}), overlay)


def run_cases(renders):
    failures = 0
    for overlay, objs in renders.items():
        clean = check(copy.deepcopy(objs), overlay)
        if clean:
            print(f"FAIL {overlay}: the unbroken rendering has problems: {clean}")
            failures += 1
        for what, mutate, expect in CASES:
            broken = copy.deepcopy(objs)
            mutate(broken)
            problems = check(broken, overlay)
            if not any(expect in p for p in problems):
                print(f"FAIL {overlay}: '{what}' not caught (wanted '{expect}' in {problems})")
                failures += 1
    return failures


def main():
    k8s = os.path.join(HERE, "..", "k8s")
    renders = {name: kustomize_lite.render(os.path.join(k8s, "overlays", name))
               for name in ("dev", "production")}
    failures = 0
    try:
        import jsonschema  # noqa: F401
        failures += run_cases(renders)
        print(f"with python3-jsonschema: {len(CASES)} cases x {len(renders)} overlays")
    except ImportError:
        print("python3-jsonschema is not installed: only the built-in validator is tested")
    real = sys.modules.get("jsonschema")
    sys.modules["jsonschema"] = None  # import now fails: k8s_check uses its own validator
    try:
        failures += run_cases(renders)
        print(f"with the built-in validator: {len(CASES)} cases x {len(renders)} overlays")
    finally:
        if real is not None:
            sys.modules["jsonschema"] = real
        else:
            del sys.modules["jsonschema"]

    # kustomize_lite on small inputs.
    base = {"spec": {"containers": [{"name": "a", "env": [{"name": "X", "value": "1"}],
                                     "args": ["--x"]}, {"name": "b"}]}}
    patch = {"spec": {"containers": [{"name": "b", "image": "i"},
                                     {"name": "a", "env": [{"name": "Y", "value": "2"}],
                                      "args": ["--y"]}]}}
    got = kustomize_lite.strategic_merge(base, patch)
    want = {"spec": {"containers": [{"name": "b", "image": "i"},
                                    {"name": "a", "env": [{"name": "Y", "value": "2"},
                                                          {"name": "X", "value": "1"}],
                                     "args": ["--y"]}]}}
    if got != want:
        print(f"FAIL strategic_merge: {got}")
        failures += 1
    # Values kubectl kustomize (kustomize v5.5) printed for these generators.
    for o, want_hash in (
            ({"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}, "4h2mbtbbt6"),
            ({"kind": "Secret", "metadata": {"name": "x"}, "type": "Opaque",
              "data": {"a": "Yg=="}}, "k695gkmbtk")):
        if kustomize_lite.content_hash(o) != want_hash:
            print(f"FAIL content_hash({o}) = {kustomize_lite.content_hash(o)}, want {want_hash}")
            failures += 1
    print(f"k8s_check_selftest: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
