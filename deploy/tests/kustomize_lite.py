"""A small renderer for the subset of Kustomize that deploy/k8s uses.

It exists so that the manifests can be rendered and checked on a machine without `kubectl` (whose
`kubectl kustomize` is the real renderer and is used whenever it is installed; k8s_check.py then
also renders every overlay with this module and requires the same objects, so the two cannot
drift apart). Supported, and nothing else (an unsupported kustomization field is an error):

- resources: YAML files (several documents each) and directories holding a kustomization.yaml;
- namespace: set on every namespaced object;
- labels: [{pairs, includeSelectors: false, includeTemplates}] (metadata labels, and the pod
  template's with includeTemplates);
- images: [{name, newName, newTag}];
- patches / patchesStrategicMerge: strategic-merge patches from files, matched to their target
  by kind and name. Lists with a merge key (containers, initContainers, volumes, env,
  volumeMounts, ports, imagePullSecrets) merge element-wise: the patch's elements first in its
  order, then the original's other elements, as kustomize v5 does; other lists are replaced; a
  null value deletes the key;
- configMapGenerator / secretGenerator: files (KEY=PATH or PATH), literals (KEY=VALUE),
  behavior create/replace/merge, options.disableNameSuffixHash, generatorOptions of the same;
  the name suffix is kustomize's content hash, and references to the generated name in pod
  specs (volumes, env, envFrom, projected volumes) are rewritten.
"""

import base64
import copy
import hashlib
import json
import os

import yaml

CLUSTER_SCOPED = {"Namespace", "PersistentVolume", "ClusterRole", "ClusterRoleBinding",
                  "StorageClass", "CustomResourceDefinition", "PriorityClass"}
KNOWN_FIELDS = {"apiVersion", "kind", "resources", "namespace", "labels", "images", "patches",
                "patchesStrategicMerge", "configMapGenerator", "secretGenerator",
                "generatorOptions"}
MERGE_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name",
              "volumes": "name", "env": "name", "volumeMounts": "mountPath",
              "imagePullSecrets": "name"}
GEN_MARK = "__kustomize_lite_generated"  # internal: needs a hash suffix


class KustomizeError(Exception):
    pass


def _load_docs(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def _merge_key(field, items):
    if field == "ports":
        return "containerPort" if any("containerPort" in i for i in items) else "port"
    return MERGE_KEYS.get(field)


def strategic_merge(base, patch, field=None):
    """Returns `base` with `patch` merged in (see the module doc)."""
    if isinstance(patch, dict) and isinstance(base, dict):
        out = dict(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            elif k in out:
                out[k] = strategic_merge(out[k], v, k)
            else:
                out[k] = copy.deepcopy(v)
        return out
    if isinstance(patch, list) and isinstance(base, list):
        key = _merge_key(field, base + patch)
        if key and all(isinstance(i, dict) and key in i for i in base + patch):
            by_key = {i[key]: i for i in base}
            merged = [strategic_merge(by_key[p[key]], p, None) if p[key] in by_key
                      else copy.deepcopy(p) for p in patch]
            patched = {p[key] for p in patch}
            return merged + [copy.deepcopy(i) for i in base if i[key] not in patched]
        return copy.deepcopy(patch)
    return copy.deepcopy(patch)


def _kv(entry, where):
    if "=" not in entry:
        raise KustomizeError(f"{where}: '{entry}' is not KEY=VALUE")
    k, v = entry.split("=", 1)
    return k, v


def _generate(kdir, gen, kind, global_opts):
    data = {}
    for entry in gen.get("files", []):
        key, path = _kv(entry, "files") if "=" in entry else (os.path.basename(entry), entry)
        with open(os.path.join(kdir, path), encoding="utf-8") as f:
            data[key] = f.read()
    for entry in gen.get("literals", []):
        k, v = _kv(entry, "literals")
        data[k] = v
    unknown = set(gen) - {"name", "files", "literals", "behavior", "options", "type", "namespace"}
    if unknown:
        raise KustomizeError(f"{kdir}: generator fields {sorted(unknown)} are not supported")
    obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": gen["name"]}}
    if gen.get("namespace"):
        obj["metadata"]["namespace"] = gen["namespace"]
    if kind == "Secret":
        obj["type"] = gen.get("type", "Opaque")
        obj["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    else:
        obj["data"] = data
    opts = dict(global_opts)
    opts.update(gen.get("options") or {})
    for what in ("labels", "annotations"):
        if opts.get(what):
            obj["metadata"][what] = dict(opts[what])
    if not opts.get("disableNameSuffixHash"):
        obj[GEN_MARK] = True
    return obj


def _find(resources, kind, name):
    for r in resources:
        if r["kind"] == kind and r["metadata"]["name"] == name:
            return r
    return None


def _pod_specs(obj):
    spec = obj.get("spec") or {}
    if obj["kind"] == "CronJob":
        spec = spec.get("jobTemplate", {}).get("spec", {})
    tmpl = spec.get("template")
    if isinstance(tmpl, dict):
        yield tmpl
    if obj["kind"] == "Pod":
        yield obj


def _containers(pod_spec):
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for c in pod_spec.get(field) or []:
            yield c


def _set_image(image, rules):
    name, tag_sep, rest = image, "", ""
    at = image.find("@")
    if at >= 0:
        name, tag_sep, rest = image[:at], "@", image[at + 1:]
    else:
        colon = image.rfind(":")
        if colon > image.rfind("/"):
            name, tag_sep, rest = image[:colon], ":", image[colon + 1:]
    for rule in rules:
        if rule["name"] != name:
            continue
        name = rule.get("newName", name)
        if "newTag" in rule:
            tag_sep, rest = ":", str(rule["newTag"])
        if "digest" in rule:
            tag_sep, rest = "@", rule["digest"]
        break
    return name + tag_sep + rest


def build(kdir):
    """Renders the kustomization in `kdir`; generated objects keep an internal mark until
    finalize() names them."""
    kpath = os.path.join(kdir, "kustomization.yaml")
    with open(kpath, encoding="utf-8") as f:
        k = yaml.safe_load(f) or {}
    unknown = set(k) - KNOWN_FIELDS
    if unknown:
        raise KustomizeError(f"{kpath}: fields {sorted(unknown)} are not supported")
    resources = []
    for r in k.get("resources", []):
        path = os.path.join(kdir, r)
        resources += build(path) if os.path.isdir(path) else _load_docs(path)
    global_opts = k.get("generatorOptions") or {}
    for field, kind in (("configMapGenerator", "ConfigMap"), ("secretGenerator", "Secret")):
        for gen in k.get(field, []):
            obj = _generate(kdir, gen, kind, global_opts)
            behavior = gen.get("behavior", "create")
            old = _find(resources, kind, gen["name"])
            if behavior == "create":
                if old is not None:
                    raise KustomizeError(f"{kpath}: {kind} {gen['name']} already exists")
                resources.append(obj)
            elif old is None:
                raise KustomizeError(f"{kpath}: {behavior}: no {kind} {gen['name']} to change")
            else:
                if behavior == "replace":
                    old["data"] = obj["data"]
                elif behavior == "merge":
                    old.setdefault("data", {}).update(obj["data"])
                else:
                    raise KustomizeError(f"{kpath}: unknown behavior {behavior}")
                if GEN_MARK in obj:
                    old[GEN_MARK] = True
                else:
                    old.pop(GEN_MARK, None)
    patches = [p if isinstance(p, str) else p.get("path") for p in
               k.get("patchesStrategicMerge", []) + k.get("patches", [])]
    for p in patches:
        if p is None:
            raise KustomizeError(f"{kpath}: only patches from files (path:) are supported")
        for doc in _load_docs(os.path.join(kdir, p)):
            target = _find(resources, doc["kind"], doc["metadata"]["name"])
            if target is None:
                raise KustomizeError(f"{kpath}: patch {p}: no {doc['kind']} "
                                     f"{doc['metadata']['name']}")
            resources[resources.index(target)] = strategic_merge(target, doc)
    if k.get("namespace"):
        for r in resources:
            if r["kind"] not in CLUSTER_SCOPED:
                r["metadata"]["namespace"] = k["namespace"]
    for label in k.get("labels", []):
        if label.get("includeSelectors"):
            raise KustomizeError(f"{kpath}: labels.includeSelectors is not supported")
        for r in resources:
            r["metadata"].setdefault("labels", {}).update(label["pairs"])
            if label.get("includeTemplates"):
                for pod in _pod_specs(r):
                    if pod is not r:
                        pod.setdefault("metadata", {}).setdefault("labels", {}).update(
                            label["pairs"])
    if k.get("images"):
        for r in resources:
            for pod in _pod_specs(r):
                for c in _containers(pod.get("spec") or {}):
                    if "image" in c:
                        c["image"] = _set_image(c["image"], k["images"])
    return resources


def _go_json(value):
    # Go's encoding/json: sorted keys, no spaces, HTML characters escaped.
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def content_hash(obj):
    """kustomize's name suffix for a generated ConfigMap or Secret: the first 10 hex digits of
    SHA-256 over Go's JSON of {kind, name, data[, type, binaryData]}, 0/1/3/a/e mapped to
    g/h/k/m/t. kustomize v5 (kubectl 1.27+) hashes with an empty name (its hasher reads the
    name from a field the generator has not set yet); older ones used the name."""
    m = {"kind": obj["kind"], "name": "", "data": obj.get("data") or {}}
    if obj["kind"] == "Secret":
        m["type"] = obj.get("type", "Opaque")
    if obj.get("binaryData"):
        m["binaryData"] = obj["binaryData"]
    digest = hashlib.sha256(_go_json(m).encode()).hexdigest()[:10]
    return digest.translate(str.maketrans("013ae", "ghkmt"))


def _rename_refs(pod_spec, kind, old, new):
    for v in pod_spec.get("volumes") or []:
        if kind == "ConfigMap" and v.get("configMap", {}).get("name") == old:
            v["configMap"]["name"] = new
        if kind == "Secret" and v.get("secret", {}).get("secretName") == old:
            v["secret"]["secretName"] = new
        for src in v.get("projected", {}).get("sources") or []:
            ref = src.get("configMap" if kind == "ConfigMap" else "secret")
            if ref and ref.get("name") == old:
                ref["name"] = new
    for c in _containers(pod_spec):
        for e in c.get("env") or []:
            ref = (e.get("valueFrom") or {}).get(
                "configMapKeyRef" if kind == "ConfigMap" else "secretKeyRef")
            if ref and ref.get("name") == old:
                ref["name"] = new
        for e in c.get("envFrom") or []:
            ref = e.get("configMapRef" if kind == "ConfigMap" else "secretRef")
            if ref and ref.get("name") == old:
                ref["name"] = new


def finalize(resources):
    for r in resources:
        if not r.pop(GEN_MARK, False):
            continue
        old = r["metadata"]["name"]
        new = f"{old}-{content_hash(r)}"
        r["metadata"]["name"] = new
        for other in resources:
            if other.get("metadata", {}).get("namespace") != r["metadata"].get("namespace"):
                continue
            for pod in _pod_specs(other):
                _rename_refs(pod.get("spec") or {}, r["kind"], old, new)
    return resources


def render(kdir):
    return finalize(build(kdir))


if __name__ == "__main__":
    import sys
    print(yaml.safe_dump_all(render(sys.argv[1]), sort_keys=True), end="")
