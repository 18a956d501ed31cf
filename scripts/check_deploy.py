"""Checks of the deployment files that a schema cannot make; run by scripts/check-deploy.sh in its
virtualenv (PyYAML and kubernetes-validate come from there).

- every YAML file parses, with no key given twice (YAML keeps the last one silently);
- every Kubernetes manifest validates strictly (unknown fields, wrong types, missing required fields)
  against the bundled schemas of each version in K8S_VERSIONS, and an unknown kind or apiVersion is an
  error (kubernetes-validate itself only warns);
- the manifests agree with each other: selectors match pod labels, the ConfigMaps, Secrets and keys they
  read exist, probes and Services name ports that exist, the autoscaler targets a Deployment that has
  CPU requests and leaves replicas to it, kustomization.yaml lists every manifest and only those;
- docker-compose.yml refers to services, Dockerfiles and files that exist, and waits only on health
  checks that are defined;
- the collector's pipelines use only receivers, processors and exporters it defines;
- the Dockerfiles copy nothing that .dockerignore leaves out of the build context, the context keeps what
  the gateway's build reads (Cargo.lock, migrations/, the offline query data in .sqlx/), and each one's final
  stage runs as a numeric non-root user (hadolint only flags an explicit `USER root`; Kubernetes'
  runAsNonRoot can only verify a numeric one).

Prints one line per problem and exits 1 if there was any.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from pathlib import Path

import yaml
from kubernetes_validate import utils as kv

K8S_VERSIONS = ("1.30.0", "1.37.0")
ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "deploy" / "k8s"
# Listed in no kustomization on purpose: applying its placeholders would overwrite the real Secret.
NOT_IN_KUSTOMIZATION = {"kustomization.yaml", "secret.example.yaml"}

problems: list[str] = []


def problem(where: object, message: str) -> None:
    problems.append(f"{where}: {message}")


class StrictLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key given twice in one mapping (merge keys `<<` may still be overridden)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} given twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def load_all(path: Path) -> list:
    try:
        return [doc for doc in yaml.load_all(path.read_text(), Loader=StrictLoader) if doc is not None]
    except yaml.YAMLError as e:
        problem(path.relative_to(ROOT), f"not valid YAML: {e}")
        return []


def pod_spec(obj: dict) -> dict | None:
    if obj.get("kind") in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
        return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return None


def pod_labels(obj: dict) -> dict:
    return (((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}


def selects(selector: dict | None, labels: dict) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_kubernetes() -> None:
    files = sorted(K8S.glob("*.yaml")) + sorted(K8S.glob("*.yml"))
    objects: list[tuple[Path, dict]] = []
    for path in files:
        if path.name == "kustomization.yaml":
            continue
        for doc in load_all(path):
            where = path.relative_to(ROOT)
            if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
                problem(where, "a document without kind and apiVersion")
                continue
            for version in K8S_VERSIONS:
                try:
                    kv.validate(doc, version, strict=True)
                except kv.ValidationError as e:
                    at = ".".join(str(p) for p in e.path)
                    problem(where, f"{doc['kind']}/{doc.get('metadata', {}).get('name')} against Kubernetes {version}: {at}: {e.message}")
                except kv.SchemaNotFoundError:
                    problem(where, f"no schema for {doc['apiVersion']} {doc['kind']} in Kubernetes {version}")
            objects.append((path, doc))

    def named(kind: str) -> dict[str, dict]:
        return {d["metadata"]["name"]: d for _, d in objects if d["kind"] == kind}

    config_maps, secrets, deployments = named("ConfigMap"), named("Secret"), named("Deployment")
    namespaces = set(named("Namespace"))
    for path, obj in objects:
        where = f"{path.relative_to(ROOT)} {obj['kind']}/{obj['metadata'].get('name')}"
        if obj["kind"] != "Namespace" and obj["metadata"].get("namespace") not in namespaces:
            problem(where, f"namespace {obj['metadata'].get('namespace')!r} is not one of the manifests' ({sorted(namespaces)})")
        spec = pod_spec(obj)
        if spec is not None:
            check_pod(where, obj, spec, config_maps, secrets)
        if obj["kind"] == "Service":
            targets = [d for d in deployments.values() if selects(obj["spec"].get("selector"), pod_labels(d))]
            if not targets:
                problem(where, "its selector matches no Deployment's pods")
            for port in obj["spec"].get("ports", []):
                target = port.get("targetPort")
                for d in targets:
                    names = {p.get("name") for c in pod_spec(d)["containers"] for p in c.get("ports", [])}
                    numbers = {p.get("containerPort") for c in pod_spec(d)["containers"] for p in c.get("ports", [])}
                    if target not in names | numbers:
                        problem(where, f"targetPort {target!r} is no port of {d['metadata']['name']}")
        if obj["kind"] == "HorizontalPodAutoscaler":
            ref = obj["spec"]["scaleTargetRef"]
            target = deployments.get(ref["name"]) if ref.get("kind") == "Deployment" else None
            if target is None:
                problem(where, f"scaleTargetRef {ref.get('kind')}/{ref.get('name')} is not a Deployment here")
            else:
                if "replicas" in target["spec"]:
                    problem(where, f"Deployment {ref['name']} sets replicas, which every apply would force back over the autoscaler's")
                for c in pod_spec(target)["containers"]:
                    if "cpu" not in (c.get("resources") or {}).get("requests", {}):
                        problem(where, f"container {c['name']} has no CPU request, so CPU utilisation is undefined")
        if obj["kind"] == "PodDisruptionBudget":
            selector = (obj["spec"].get("selector") or {}).get("matchLabels")
            if not any(selects(selector, pod_labels(d)) for d in deployments.values()):
                problem(where, "its selector matches no Deployment's pods")

    kustomization = K8S / "kustomization.yaml"
    if kustomization.exists():
        docs = load_all(kustomization)
        listed = set((docs[0] if docs else {}).get("resources") or [])
        for name in sorted(listed):
            if not (K8S / name).is_file():
                problem(kustomization.relative_to(ROOT), f"lists {name}, which does not exist")
        for path in files:
            if path.name not in listed and path.name not in NOT_IN_KUSTOMIZATION:
                problem(kustomization.relative_to(ROOT), f"does not list {path.name}")
        images = {c["image"].rsplit(":", 1)[0] for _, o in objects if pod_spec(o) for c in pod_spec(o).get("containers", [])}
        for image in (docs[0] if docs else {}).get("images") or []:
            if image.get("name") not in images:
                problem(kustomization.relative_to(ROOT), f"sets image {image.get('name')}, which no container uses")


def check_pod(where: str, obj: dict, spec: dict, config_maps: dict, secrets: dict) -> None:
    if obj["kind"] == "Deployment":
        selector = ((obj["spec"].get("selector") or {}).get("matchLabels")) or {}
        if not selects(selector, pod_labels(obj)):
            problem(where, "spec.selector.matchLabels is empty or does not match the pod template's labels")
    for c in spec.get("initContainers", []) + spec.get("containers", []):
        cwhere = f"{where} container {c.get('name')}"
        for source in c.get("envFrom", []):
            if "configMapRef" in source and source["configMapRef"]["name"] not in config_maps:
                problem(cwhere, f"envFrom ConfigMap {source['configMapRef']['name']} is not defined")
            if "secretRef" in source and source["secretRef"]["name"] not in secrets:
                problem(cwhere, f"envFrom Secret {source['secretRef']['name']} is not defined (secret.example.yaml)")
        defined = set()
        for var in c.get("env", []):
            for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", var.get("value", "")):
                if ref not in defined:
                    problem(cwhere, f"env {var['name']} uses $({ref}) before (or without) defining it")
            defined.add(var["name"])
            source = var.get("valueFrom") or {}
            for kind, table in (("secretKeyRef", secrets), ("configMapKeyRef", config_maps)):
                if kind in source:
                    ref = source[kind]
                    found = table.get(ref["name"])
                    keys = set((found or {}).get("data") or {}) | set((found or {}).get("stringData") or {})
                    if found is None or ref["key"] not in keys:
                        problem(cwhere, f"env {var['name']}: {kind} {ref['name']}/{ref['key']} is not defined")
        ports = {p.get("name") for p in c.get("ports", [])} | {p.get("containerPort") for p in c.get("ports", [])}
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            port = ((c.get(probe) or {}).get("httpGet") or {}).get("port")
            if port is not None and port not in ports:
                problem(cwhere, f"{probe} uses port {port!r}, which the container does not declare")
        mounts = {m["name"] for m in c.get("volumeMounts", [])}
        volumes = {v["name"] for v in spec.get("volumes", [])}
        for missing in sorted(mounts - volumes):
            problem(cwhere, f"mounts volume {missing}, which the pod does not define")


def check_compose() -> None:
    path = ROOT / "docker-compose.yml"
    docs = load_all(path)
    if not docs:
        return
    services = docs[0].get("services") or {}
    where = path.relative_to(ROOT)
    for name, service in services.items():
        depends = service.get("depends_on") or {}
        for dep, how in (depends.items() if isinstance(depends, dict) else ((d, {}) for d in depends)):
            if dep not in services:
                problem(where, f"service {name} depends on {dep}, which is not a service")
            elif (how or {}).get("condition") == "service_healthy":
                check = services[dep].get("healthcheck") or {}
                if not check.get("test") or check.get("disable"):
                    problem(where, f"service {name} waits for {dep} to be healthy, but {dep} defines no health check")
        build = service.get("build")
        if isinstance(build, dict):
            context = ROOT / build.get("context", ".")
            if not context.is_dir():
                problem(where, f"service {name}: build context {build.get('context')} does not exist")
            elif not (context / build.get("dockerfile", "Dockerfile")).is_file():
                problem(where, f"service {name}: Dockerfile {build.get('dockerfile')} does not exist")
        for volume in service.get("volumes") or []:
            source = volume.split(":", 1)[0] if isinstance(volume, str) else volume.get("source", "")
            if source.startswith((".", "/")) and not (ROOT / source).exists():
                problem(where, f"service {name} mounts {source}, which does not exist")


def check_collector() -> None:
    path = ROOT / "deploy" / "otel-collector.yaml"
    docs = load_all(path)
    if not docs:
        return
    config = docs[0]
    pipelines = (config.get("service") or {}).get("pipelines") or {}
    if not pipelines:
        problem(path.relative_to(ROOT), "service.pipelines is empty")
    for name, pipeline in pipelines.items():
        for section in ("receivers", "processors", "exporters"):
            for component in pipeline.get(section) or []:
                if component not in (config.get(section) or {}):
                    problem(path.relative_to(ROOT), f"pipeline {name} uses {section[:-1]} {component}, which is not defined")
        if not pipeline.get("receivers") or not pipeline.get("exporters"):
            problem(path.relative_to(ROOT), f"pipeline {name} needs at least one receiver and one exporter")


def ignored(relative: str, patterns: list[str]) -> bool:
    """Whether .dockerignore leaves this path (or a folder above it) out; later `!` patterns re-include."""
    parts = relative.strip("/").split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        if any(fnmatch.fnmatchcase(p, pattern) or fnmatch.fnmatchcase(p, pattern.replace("**/", "")) for p in prefixes):
            result = not negate
    return result


def check_dockerfiles() -> None:
    path = ROOT / ".dockerignore"
    if not path.is_file():
        problem(".dockerignore", "missing: the whole clone (builds, models, .git) would be sent to every build")
        return
    patterns = [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    for big in ("target", "models", ".git", ".data"):
        if not ignored(big, patterns):
            problem(".dockerignore", f"does not leave out {big}/")
    # `COPY . .` brings these: the lock, the migrations the gateway embeds, and the data its SQL is checked
    # against at compile time (the image builds with SQLX_OFFLINE=true, with no database to ask).
    for needed in ("Cargo.lock", "migrations", ".sqlx"):
        if ignored(needed, patterns):
            problem(".dockerignore", f"leaves out {needed}, which the gateway's build reads")
    for dockerfile in sorted((ROOT / "deploy" / "docker").glob("*.Dockerfile")):
        user = None
        for line in dockerfile.read_text().splitlines():
            words = line.split()
            keyword = words[0].upper() if words else ""
            if keyword == "FROM":
                user = None
            elif keyword == "USER" and len(words) > 1:
                user = words[1].split(":")[0]
            if keyword not in ("COPY", "ADD") or any(w.startswith("--from") for w in words):
                continue
            for source in [w for w in words[1:-1] if not w.startswith("--")]:
                if source not in (".", "./") and ignored(source, patterns):
                    problem(dockerfile.relative_to(ROOT), f"copies {source}, which .dockerignore leaves out")
                elif source not in (".", "./") and not (ROOT / source).exists():
                    problem(dockerfile.relative_to(ROOT), f"copies {source}, which does not exist")
        if user is None or not user.isdigit() or int(user) == 0:
            problem(dockerfile.relative_to(ROOT), f"the final stage runs as {user or 'root (no USER)'}: want a numeric non-root USER")


def main() -> int:
    check_kubernetes()
    check_compose()
    check_collector()
    check_dockerfiles()
    for line in problems:
        print(f"check-deploy: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
