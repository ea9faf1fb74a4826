"""JSON schemas (draft 7) for the Kubernetes kinds deploy/k8s uses, written for this project.

They are a strict subset of the API's OpenAPI schemas, kept offline: every object, container,
pod spec, probe, volume and port is closed (additionalProperties: false), so a misspelt field
(`readinesProbe`, `mountpath`) fails instead of being dropped silently by the API server; names,
ports, quantities and enums follow the API's validation rules. k8s_check.py validates every
rendered object against SCHEMAS[(apiVersion, kind)] with python3-jsonschema (or, where it is not
installed, with the small validator there).
"""

DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
PORT_NAME = r"^(?=.{1,15}$)(?=.*[a-z])[a-z0-9]([-a-z0-9]*[a-z0-9])?$"  # IANA_SVC_NAME
QUANTITY = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ENV_NAME = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"


def obj(props, required=(), **extra):
    s = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        s["required"] = list(required)
    s.update(extra)
    return s


STR = {"type": "string"}
NONEMPTY = {"type": "string", "minLength": 1}
BOOL = {"type": "boolean"}
INT = {"type": "integer"}
NONNEG = {"type": "integer", "minimum": 0}
PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
INT_OR_NAME = {"anyOf": [PORT, {"type": "string", "pattern": PORT_NAME}]}
STR_LIST = {"type": "array", "items": STR}
LABELS = {"type": "object", "additionalProperties": {"type": "string", "pattern": LABEL_VALUE,
                                                     "maxLength": 63}}
ANNOTATIONS = {"type": "object", "additionalProperties": STR}
RESOURCE_MAP = {"type": "object", "additionalProperties": {
    "anyOf": [{"type": "string", "pattern": QUANTITY}, {"type": "number", "minimum": 0}]},
    "propertyNames": {"enum": ["cpu", "memory", "ephemeral-storage", "nvidia.com/gpu"]}}

METADATA = obj({"name": {"type": "string", "pattern": DNS1123_SUBDOMAIN, "maxLength": 253},
                "namespace": {"type": "string", "pattern": DNS1123_LABEL, "maxLength": 63},
                "labels": LABELS, "annotations": ANNOTATIONS}, ["name"])
TEMPLATE_METADATA = obj({"labels": LABELS, "annotations": ANNOTATIONS})
SELECTOR = obj({"matchLabels": LABELS, "matchExpressions": {"type": "array"}})

KEY_TO_PATH = {"type": "array", "items": obj({"key": NONEMPTY, "path": NONEMPTY,
                                              "mode": {"type": "integer", "minimum": 0,
                                                       "maximum": 0o777}}, ["key", "path"])}
MODE = {"type": "integer", "minimum": 0, "maximum": 0o777}
VOLUME_SOURCES = {
    "emptyDir": obj({"medium": {"enum": ["", "Memory"]},
                     "sizeLimit": {"type": "string", "pattern": QUANTITY}}),
    "secret": obj({"secretName": {"type": "string", "pattern": DNS1123_SUBDOMAIN},
                   "items": KEY_TO_PATH, "defaultMode": MODE, "optional": BOOL}, ["secretName"]),
    "configMap": obj({"name": {"type": "string", "pattern": DNS1123_SUBDOMAIN},
                      "items": KEY_TO_PATH, "defaultMode": MODE, "optional": BOOL}, ["name"]),
    "persistentVolumeClaim": obj({"claimName": {"type": "string", "pattern": DNS1123_SUBDOMAIN},
                                  "readOnly": BOOL}, ["claimName"]),
    "hostPath": obj({"path": NONEMPTY, "type": STR}, ["path"]),
    "downwardAPI": {"type": "object"},
    "projected": {"type": "object"},
}
VOLUME = {"type": "object", "required": ["name"],
          "properties": dict({"name": {"type": "string", "pattern": DNS1123_LABEL}},
                             **VOLUME_SOURCES),
          "additionalProperties": False,
          "minProperties": 2, "maxProperties": 2}  # a name and exactly one source

FIELD_REF = obj({"fieldPath": NONEMPTY, "apiVersion": STR}, ["fieldPath"])
KEY_REF = obj({"name": NONEMPTY, "key": NONEMPTY, "optional": BOOL}, ["name", "key"])
ENV_VAR = obj({"name": {"type": "string", "pattern": ENV_NAME},
               "value": STR,
               "valueFrom": obj({"fieldRef": FIELD_REF, "configMapKeyRef": KEY_REF,
                                 "secretKeyRef": KEY_REF, "resourceFieldRef": {"type": "object"}},
                                minProperties=1, maxProperties=1)},
              ["name"], **{"not": {"required": ["value", "valueFrom"]}})
CONTAINER_PORT = obj({"name": {"type": "string", "pattern": PORT_NAME}, "containerPort": PORT,
                      "protocol": {"enum": ["TCP", "UDP", "SCTP"]}, "hostPort": PORT,
                      "hostIP": STR}, ["containerPort"])
HANDLERS = {
    "exec": obj({"command": {"type": "array", "items": STR, "minItems": 1}}, ["command"]),
    "httpGet": obj({"path": STR, "port": INT_OR_NAME, "host": STR,
                    "scheme": {"enum": ["HTTP", "HTTPS"]}, "httpHeaders": {"type": "array"}},
                   ["port"]),
    "tcpSocket": obj({"port": INT_OR_NAME, "host": STR}, ["port"]),
    "grpc": obj({"port": PORT, "service": STR}, ["port"]),
}
PROBE = obj(dict(HANDLERS, **{
    "initialDelaySeconds": NONNEG, "timeoutSeconds": {"type": "integer", "minimum": 1},
    "periodSeconds": {"type": "integer", "minimum": 1},
    "successThreshold": {"type": "integer", "minimum": 1},
    "failureThreshold": {"type": "integer", "minimum": 1},
    "terminationGracePeriodSeconds": NONNEG}),
    oneOf=[{"required": [h]} for h in HANDLERS])
CAPS = obj({"add": STR_LIST, "drop": STR_LIST})
SECCOMP = obj({"type": {"enum": ["RuntimeDefault", "Localhost", "Unconfined"]},
               "localhostProfile": STR}, ["type"])
CONTAINER_SECURITY = obj({
    "runAsUser": NONNEG, "runAsGroup": NONNEG, "runAsNonRoot": BOOL, "privileged": BOOL,
    "allowPrivilegeEscalation": BOOL, "readOnlyRootFilesystem": BOOL, "capabilities": CAPS,
    "seccompProfile": SECCOMP, "procMount": STR, "seLinuxOptions": {"type": "object"}})
POD_SECURITY = obj({
    "runAsUser": NONNEG, "runAsGroup": NONNEG, "runAsNonRoot": BOOL, "fsGroup": NONNEG,
    "fsGroupChangePolicy": {"enum": ["OnRootMismatch", "Always"]},
    "supplementalGroups": {"type": "array", "items": NONNEG}, "seccompProfile": SECCOMP,
    "sysctls": {"type": "array"}, "seLinuxOptions": {"type": "object"}})
VOLUME_MOUNT = obj({"name": {"type": "string", "pattern": DNS1123_LABEL},
                    "mountPath": {"type": "string", "pattern": "^/"}, "readOnly": BOOL,
                    "subPath": {"type": "string", "pattern": "^[^/]"},
                    "mountPropagation": STR}, ["name", "mountPath"])
CONTAINER = obj({
    "name": {"type": "string", "pattern": DNS1123_LABEL, "maxLength": 63},
    "image": NONEMPTY, "command": STR_LIST, "args": STR_LIST, "workingDir": STR,
    "ports": {"type": "array", "items": CONTAINER_PORT},
    "env": {"type": "array", "items": ENV_VAR},
    "envFrom": {"type": "array"},
    "resources": obj({"limits": RESOURCE_MAP, "requests": RESOURCE_MAP}),
    "volumeMounts": {"type": "array", "items": VOLUME_MOUNT},
    "livenessProbe": PROBE, "readinessProbe": PROBE, "startupProbe": PROBE,
    "lifecycle": {"type": "object"},
    "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
    "securityContext": CONTAINER_SECURITY,
    "restartPolicy": {"enum": ["Always"]},  # init containers only: a native sidecar
    "terminationMessagePath": STR,
    "terminationMessagePolicy": {"enum": ["File", "FallbackToLogsOnError"]},
    "stdin": BOOL, "tty": BOOL}, ["name", "image"])
POD_SPEC = obj({
    "volumes": {"type": "array", "items": VOLUME},
    "initContainers": {"type": "array", "items": CONTAINER},
    "containers": {"type": "array", "items": CONTAINER, "minItems": 1},
    "restartPolicy": {"enum": ["Always", "OnFailure", "Never"]},
    "terminationGracePeriodSeconds": NONNEG, "activeDeadlineSeconds": NONNEG,
    "dnsPolicy": STR, "nodeSelector": LABELS, "serviceAccountName": STR,
    "automountServiceAccountToken": BOOL, "hostNetwork": BOOL, "hostPID": BOOL, "hostIPC": BOOL,
    "shareProcessNamespace": BOOL, "securityContext": POD_SECURITY,
    "imagePullSecrets": {"type": "array"},
    "hostname": {"type": "string", "pattern": DNS1123_LABEL},
    "subdomain": {"type": "string", "pattern": DNS1123_LABEL},
    "affinity": {"type": "object"}, "tolerations": {"type": "array"},
    "priorityClassName": STR, "runtimeClassName": STR, "enableServiceLinks": BOOL,
    "topologySpreadConstraints": {"type": "array"}}, ["containers"])
POD_TEMPLATE = obj({"metadata": TEMPLATE_METADATA, "spec": POD_SPEC}, ["metadata", "spec"])


def top(api_version, kind, spec=None, spec_required=True, **extra_props):
    props = {"apiVersion": {"const": api_version}, "kind": {"const": kind}, "metadata": METADATA}
    required = ["apiVersion", "kind", "metadata"]
    if spec is not None:
        props["spec"] = spec
        if spec_required:
            required.append("spec")
    props.update(extra_props)
    return obj(props, required)


SERVICE_PORT = obj({"name": {"type": "string", "pattern": PORT_NAME}, "port": PORT,
                    "targetPort": INT_OR_NAME, "protocol": {"enum": ["TCP", "UDP", "SCTP"]},
                    "nodePort": PORT, "appProtocol": STR}, ["port"])

SCHEMAS = {
    ("v1", "Namespace"): top("v1", "Namespace"),
    ("v1", "ConfigMap"): top("v1", "ConfigMap", data={"type": "object",
                                                     "additionalProperties": STR},
                             binaryData={"type": "object"}, immutable=BOOL),
    ("v1", "Secret"): top("v1", "Secret", type=STR, immutable=BOOL,
                          data={"type": "object", "additionalProperties": {
                              "type": "string", "pattern": "^[A-Za-z0-9+/]*=*$"}},
                          stringData={"type": "object", "additionalProperties": STR}),
    ("v1", "Service"): top("v1", "Service", obj({
        "clusterIP": STR, "selector": LABELS,
        "type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]},
        "ports": {"type": "array", "items": SERVICE_PORT, "minItems": 1},
        "publishNotReadyAddresses": BOOL, "sessionAffinity": STR}, ["ports"])),
    ("v1", "PersistentVolumeClaim"): top("v1", "PersistentVolumeClaim", obj({
        "accessModes": {"type": "array", "minItems": 1, "items": {"enum": [
            "ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"]}},
        "resources": obj({"requests": obj({"storage": {"type": "string", "pattern": QUANTITY}},
                                          ["storage"])}, ["requests"]),
        "storageClassName": STR, "volumeMode": {"enum": ["Filesystem", "Block"]}},
        ["accessModes", "resources"])),
    ("apps/v1", "Deployment"): top("apps/v1", "Deployment", obj({
        "replicas": NONNEG, "selector": SELECTOR, "template": POD_TEMPLATE,
        "strategy": obj({"type": {"enum": ["Recreate", "RollingUpdate"]},
                         "rollingUpdate": {"type": "object"}}),
        "revisionHistoryLimit": NONNEG, "minReadySeconds": NONNEG},
        ["selector", "template"])),
    ("batch/v1", "Job"): top("batch/v1", "Job", obj({
        "completionMode": {"enum": ["NonIndexed", "Indexed"]}, "completions": NONNEG,
        "parallelism": NONNEG, "backoffLimit": NONNEG, "activeDeadlineSeconds": NONNEG,
        "ttlSecondsAfterFinished": NONNEG, "template": POD_TEMPLATE,
        "podFailurePolicy": {"type": "object"}},
        ["template"])),
}
