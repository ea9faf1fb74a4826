#!/usr/bin/env python3
"""Lints deploy/docker/Dockerfile without Docker (no image can be pulled here).

  docker_check.py --build-dir=DIR --agent=BIN --profctl=BIN [--inject-lib=BIN]

Checks, each of which names what is wrong:
- stages: "build" FROM debian:12 running scripts/bootstrap.sh and a Release CMake build of the
  targets the runtime stages copy; "agent" and "coordinator" FROM debian:12-slim;
- every COPY source from the context exists in the repository and is not excluded by
  Dockerfile.dockerignore; every COPY --from=build source is in the build stage's build folder,
  at the path CMake gives that target (the binaries passed in, relative to --build-dir);
- runtime packages: for each binary copied into a runtime stage, its NEEDED libraries (readelf -d)
  resolved on this Debian 12 machine (ldconfig) and mapped to packages (dpkg -S) must be
  installed by the stage, what debian:12-slim always has (libc6, libgcc-s1, zlib1g), or their
  dependencies (dpkg-query): a missing one fails the image at run time (an extra one only grows
  it, and is noted);
- apt-get install uses --no-install-recommends and the lists are removed;
- the paths the Kubernetes manifests run (/usr/bin/profctl-agent, /usr/bin/profctl, the copy of
  /usr/lib/profctl/libprofctl_inject.so) are COPY destinations of the matching stage, and the
  stages' USER is the manifests' runAsUser.
Exit 0 if all hold, 1 otherwise.
"""

import argparse
import fnmatch
import functools
import os
import re
import shlex
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
BASE_PACKAGES = {"libc6", "libgcc-s1", "zlib1g"}  # always in debian:12-slim
SANITIZER_LIBS = ("libasan", "libubsan", "libtsan", "liblsan")


def parse(path):
    """[(stage name or None, instruction, argument text)] with continuations joined."""
    out, stage, buf = [], None, ""
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not buf and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.endswith("\\"):
                buf += line[:-1] + " "
                continue
            line, buf = buf + line, ""
            instr, _, rest = line.strip().partition(" ")
            instr = instr.upper()
            if instr == "FROM":
                m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?", rest.strip(), re.I)
                stage = m.group(2)
                out.append((stage, "FROM", m.group(1)))
            else:
                out.append((stage, instr, rest.strip()))
    return out


def ignored(rel, patterns):
    for p in patterns:
        if fnmatch.fnmatch(rel, p) or rel == p or rel.startswith(p.rstrip("/") + "/"):
            return True
    return False


def needed(binary):
    out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=True)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out.stdout)


@functools.lru_cache(maxsize=None)
def _ld_cache():
    """{soname: path} of this machine's x86-64 libraries: one `ldconfig -p` for every lookup."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    libs = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) \(libc6,x86-64[^)]*\) => (\S+)", line)
        if m:
            libs.setdefault(m.group(1), m.group(2))
    return libs


def resolve(soname):
    return _ld_cache().get(soname)


def _candidates(path):
    """`path`, its real path, and each with /usr/lib and /lib swapped (merged /usr)."""
    cands = [path, os.path.realpath(path)]
    for p in list(cands):
        for a, b in (("/usr/lib/", "/lib/"), ("/lib/", "/usr/lib/")):
            if p.startswith(a):
                cands.append(b + p[len(a):])
    return cands


def packages_of(paths):
    """{path: the Debian package that installed it} for those of `paths` dpkg knows (the first of
    each path's candidates it knows), in one `dpkg -S` call: each call reads every package's file
    list, which made this check take a minute when it was one call per candidate."""
    every = sorted({c for p in paths for c in _candidates(p)})
    if not every:
        return {}
    r = subprocess.run(["dpkg", "-S", *every], capture_output=True, text=True)
    owner = {}
    for line in r.stdout.splitlines():
        if line.startswith("diversion "):
            continue
        pkgs, sep, f = line.partition(": ")
        if sep:
            owner.setdefault(f.strip(), pkgs.split(",")[0].strip().split(":")[0])
    out = {}
    for p in paths:
        for c in _candidates(p):
            if c in owner:
                out[p] = owner[c]
                break
    return out


def dependency_closure(packages):
    """`packages` and everything they depend on (Depends, Pre-Depends), as installed here: one
    `dpkg-query` for the whole database, walked here."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Package}\t${Depends}, ${Pre-Depends}\n"],
                       capture_output=True, text=True)
    depends = {}
    for line in r.stdout.splitlines():
        pkg, _, deps = line.partition("\t")
        depends.setdefault(pkg, []).append(deps)
    seen, todo = set(), list(packages)
    while todo:
        pkg = todo.pop()
        if pkg in seen:
            continue
        seen.add(pkg)
        for deps in depends.get(pkg, []):
            for dep in deps.split(","):
                name = dep.split("|")[0].strip().split(" ")[0].split(":")[0]
                if name:
                    todo.append(name)
    return seen


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dockerfile", default=os.path.join(REPO, "deploy", "docker", "Dockerfile"))
    ap.add_argument("--build-dir", required=True, help="the CMake build folder of the binaries")
    ap.add_argument("--agent", required=True)
    ap.add_argument("--profctl", required=True)
    ap.add_argument("--inject-lib")
    args = ap.parse_args()
    problems, notes = [], []
    instrs = parse(args.dockerfile)
    ign_path = args.dockerfile + ".dockerignore"
    patterns = []
    if os.path.exists(ign_path):
        patterns = [ln.strip() for ln in open(ign_path) if ln.strip() and not ln.startswith("#")]
    for must in (".git", "build"):
        if must not in patterns:
            problems.append(f"{ign_path}: does not exclude {must}/ from the context")

    froms = {s: img for s, i, img in instrs if i == "FROM"}
    for stage, image in (("build", "debian:12"), ("agent", "debian:12-slim"),
                         ("coordinator", "debian:12-slim")):
        if froms.get(stage) != image:
            problems.append(f"stage {stage}: FROM {froms.get(stage)}, want {image}")

    build_runs = " ".join(a for s, i, a in instrs if s == "build" and i == "RUN")
    if "scripts/bootstrap.sh" not in build_runs:
        problems.append("stage build does not run scripts/bootstrap.sh")
    m = re.search(r"cmake -S \S+ -B (\S+)", build_runs)
    bdir = m.group(1) if m else None
    if not m or "-DCMAKE_BUILD_TYPE=Release" not in build_runs:
        problems.append("stage build has no Release cmake configure (-B DIR)")
    workdir = next((a for s, i, a in instrs if s == "build" and i == "WORKDIR"), "/")
    targets = re.search(r"--target ((?:[\w-]+ ?)+)", build_runs)
    targets = set(targets.group(1).split()) if targets else set()

    # The binaries the runtime stages copy, by their path in the build folder.
    build_dir = os.path.abspath(args.build_dir)
    binaries = {"profctl-agent": args.agent, "profctl": args.profctl,
                "profctl_inject": args.inject_lib}
    by_rel = {}
    for target, path in binaries.items():
        if path is not None and not os.path.isfile(path):
            problems.append(f"{path} (target {target}) is not built: build every target first")
            path = binaries[target] = None
        if path is None and target != "profctl_inject":
            continue
        if path is None:
            # Where CMake will put it (the name is fixed; the target may not exist yet).
            by_rel["inject/libprofctl_inject.so"] = (target, None)
            notes.append("no libprofctl_inject.so built: its package needs are not checked")
            continue
        rel = os.path.relpath(os.path.abspath(path), build_dir)
        if rel.startswith(".."):
            problems.append(f"{path} is not inside --build-dir {build_dir}")
        by_rel[rel] = (target, path)

    stage_copies = {}  # stage -> {dest: (target, binary)}
    for stage, instr, rest in instrs:
        if instr not in ("COPY", "ADD"):
            continue
        words = shlex.split(rest)
        opts = [w for w in words if w.startswith("--")]
        srcs, dest = [w for w in words if not w.startswith("--")][:-1], words[-1]
        frm = next((o.split("=", 1)[1] for o in opts if o.startswith("--from=")), None)
        for src in srcs:
            if frm is None:
                rel = os.path.normpath(src)
                if not os.path.exists(os.path.join(REPO, rel)):
                    problems.append(f"stage {stage}: COPY {src}: no such file in the repository")
                elif rel != "." and ignored(rel, patterns):
                    problems.append(f"stage {stage}: COPY {src} is excluded by the dockerignore")
                continue
            if frm != "build":
                problems.append(f"stage {stage}: COPY --from={frm}: only the build stage is used")
                continue
            prefix = os.path.join(workdir, bdir or "?") + "/"
            if not src.startswith(prefix):
                problems.append(f"stage {stage}: COPY --from=build {src} is not under {prefix}")
                continue
            rel = src[len(prefix):]
            if rel not in by_rel:
                problems.append(f"stage {stage}: COPY --from=build {src}: CMake puts no target "
                                f"there (known: {sorted(by_rel)})")
                continue
            target, path = by_rel[rel]
            if target not in targets:
                problems.append(f"stage build does not build target {target} (--target)")
            stage_copies.setdefault(stage, {})[dest] = (target, path)

    if shutil.which("dpkg") is None or shutil.which("readelf") is None:
        notes.append("dpkg or readelf missing: runtime packages not compared")
    else:
        for stage in ("agent", "coordinator"):
            runs = " ".join(a for s, i, a in instrs if s == stage and i == "RUN")
            inst = re.search(r"apt-get install ([^&]*)", runs)
            installed = {w for w in (inst.group(1).split() if inst else []) if not
                         w.startswith("-")}
            if inst and "--no-install-recommends" not in inst.group(1):
                problems.append(f"stage {stage}: apt-get install without --no-install-recommends")
            if inst and "rm -rf /var/lib/apt/lists" not in runs:
                problems.append(f"stage {stage}: the apt lists are left in the image")
            want = set()
            links = []  # (target, soname, resolved path or None)
            for dest, (target, path) in stage_copies.get(stage, {}).items():
                if path is None:
                    continue
                for so in needed(path):
                    if so.startswith(SANITIZER_LIBS):
                        notes.append(f"{target}: {so} (a sanitizer build) ignored")
                        continue
                    links.append((target, so, resolve(so)))
            owners = packages_of([lib for _, _, lib in links if lib])
            for target, so, lib in links:
                pkg = owners.get(lib) if lib else None
                if pkg is None:
                    problems.append(f"{target}: NEEDED {so} belongs to no Debian package "
                                    f"here ({lib})")
                    continue
                want.add(pkg.split(":")[0])
            # A library the binaries link directly may come in as a dependency of one the stage
            # installs (a sanitizer or Debug build links gRPC's own libraries directly).
            missing = want - dependency_closure(installed | BASE_PACKAGES)
            extra = installed - want
            if missing:
                problems.append(f"stage {stage}: the binaries need {sorted(missing)}, which the "
                                f"stage does not install")
            if extra:
                # Only a larger image; other build configurations may link them.
                notes.append(f"stage {stage}: installs {sorted(extra)}, which no binary there "
                             f"links in this build")
            print(f"stage {stage}: needs {sorted(want - BASE_PACKAGES)} (+ base "
                  f"{sorted(want & BASE_PACKAGES)}), installs {sorted(installed)}")

    # What the manifests run must be in the images, as the user the manifests set.
    expect = {"agent": ["/usr/bin/profctl-agent", "/usr/lib/profctl/libprofctl_inject.so"],
              "coordinator": ["/usr/bin/profctl"]}
    for stage, paths in expect.items():
        for p in paths:
            if p not in stage_copies.get(stage, {}):
                problems.append(f"stage {stage}: {p} (run by deploy/k8s) is not copied there")
        users = [a for s, i, a in instrs if s == stage and i == "USER"]
        if users != ["65532:65532"]:
            problems.append(f"stage {stage}: USER {users}, want 65532:65532 (the manifests' "
                            f"runAsUser)")
        entry = [a for s, i, a in instrs if s == stage and i == "ENTRYPOINT"]
        if entry and shlex.split(entry[0].strip("[]").replace(",", " "))[0] not in \
                stage_copies.get(stage, {}):
            problems.append(f"stage {stage}: ENTRYPOINT {entry[0]} is not a copied binary")

    for n in notes:
        print("NOTE:", n)
    for p in problems:
        print("PROBLEM:", p)
    print(f"docker_check: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
