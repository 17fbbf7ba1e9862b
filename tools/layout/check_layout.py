#!/usr/bin/env python3
"""tools/layout/check_layout.py: checks the layout rules of docs/ARCHITECTURE.md.

1. The dependency rule, over `bazel query` (every cc_* target's `deps`):
     hull        imports nothing of ours (hull/sim is part of hull)
     shm, probe  only hull
     membership  nothing of ours
     client      only shm
     tracer      only client, shm, probe, trace, hull, collector
     collector   only proto, trace, probe, hull
     lttng       only client, shm
     trace       only hull
     proto       nothing of ours
     metrics     only proto, probe
   and nothing imports clocksyncd/ or tools/ (except the exceptions listed
   in EXCEPTIONS, each with its reason). Test-only targets (tests, fakes,
   benchmarks) may also import testing/ and proto/.
2. No source file outside tests is over 800 lines.
3. Every source file outside tests opens with a comment naming its path.

Exits 1 and names every offence; 0 when the layout holds.
Usage: tools/layout/check_layout.py [--no_query]   (from the repository root)
"""
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

OURS = {"hull", "shm", "probe", "membership", "client", "tracer", "trace",
        "collector",
        "proto", "metrics", "lttng", "clocksyncd", "tools", "testing", "tests",
        "examples", "deploy"}
# What each top-level package may import besides itself (None: anything
# but the packages nobody imports).
ALLOWED = {
    "hull": set(),
    "shm": {"hull"},
    "probe": {"hull"},
    "membership": set(),
    "client": {"shm"},
    "tracer": {"client", "shm", "probe", "trace", "hull", "collector"},
    # Trace collection over gRPC: the protocol (proto), the raw archives and
    # the merge (trace), addresses (probe); the tracer holds its streaming
    # end.
    "collector": {"proto", "trace", "probe", "hull"},
    "trace": {"hull"},
    # The LTTng-UST clock plugin: global time through the client library.
    "lttng": {"client", "shm"},
    "proto": set(),
    # The exposition format of NodeStatus (proto) and the HTTP endpoint
    # serving it (probe's address parser), shared by the daemon and
    # clocksyncctl, which may not import each other.
    "metrics": {"proto", "probe"},
    "testing": None,
    "clocksyncd": None,
    "tools": None,
    "tests": None,
    "examples": None,
}
NOBODY_IMPORTS = {"clocksyncd", "tools"}
# Targets any package may import: label -> why.
EVERYONE_IMPORTS = {
    "//:version": "CLOCKSYNC_VERSION, generated from the file VERSION",
}
TESTONLY_EXTRA = {"testing", "proto"}
# (from package, to target): why.
EXCEPTIONS = {
    ("tools/clocksyncctl", "//clocksyncd:status_service"):
        "clocksyncctl's end-to-end test serves a fake node with the real service",
    ("tools/clocksyncctl", "//clocksyncd:status_service_testing"):
        "the fake node and sample status the CLI's tests print",
}
MAX_LINES = 800
SOURCE = re.compile(r"\.(h|cc|c)$")
TEST_FILE = re.compile(r"(_test\.(cc|c)|_testing\.(h|cc))$")
SKIP_DIRS = {".git", "third_party"}


def top(package):
    return package.split("/")[0]


def check_deps():
    out = subprocess.run(
        ["bazel", "query", "--output=xml", "--noimplicit_deps",
         'kind("cc_(library|binary|test)", //...)'],
        check=True, capture_output=True, text=True).stdout
    errors = []
    rules = 0
    for rule in ET.fromstring(out).iter("rule"):
        rules += 1
        name = rule.get("name")
        package = name[2:].split(":")[0]
        testonly = any(b.get("name") == "testonly" and b.get("value") == "true"
                       for b in rule.iter("boolean"))
        if rule.get("class") == "cc_test":
            testonly = True
        allowed = ALLOWED.get(top(package), set())
        for lst in rule.iter("list"):
            if lst.get("name") != "deps":
                continue
            for label in lst.iter("label"):
                dep = label.get("value")
                if not dep.startswith("//"):
                    continue  # @system//... : Debian's libraries
                dep_package = dep[2:].split(":")[0]
                dep_top = top(dep_package)
                if dep_top == top(package):
                    continue
                if (package, dep) in EXCEPTIONS or dep in EVERYONE_IMPORTS:
                    continue
                if dep_top in NOBODY_IMPORTS:
                    errors.append(f"{name} -> {dep}: nothing imports {dep_top}/")
                    continue
                if allowed is None:
                    continue
                if dep_top in allowed:
                    continue
                if testonly and dep_top in TESTONLY_EXTRA:
                    continue
                errors.append(
                    f"{name} -> {dep}: {top(package)}/ may import only "
                    f"{', '.join(sorted(allowed)) or 'nothing of ours'}")
    if rules == 0:
        errors.append("bazel query found no cc targets")
    return errors, rules


def check_files():
    errors = []
    count = 0
    for root, dirs, files in os.walk("."):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("bazel-")]
        for f in files:
            if not SOURCE.search(f) or TEST_FILE.search(f):
                continue
            path = os.path.relpath(os.path.join(root, f), ".")
            if path.startswith("tests/"):
                continue
            count += 1
            with open(path, encoding="utf-8") as fh:
                lines = fh.read().split("\n")
            if len(lines) - 1 > MAX_LINES:
                errors.append(f"{path}: {len(lines) - 1} lines (at most {MAX_LINES} outside tests)")
            head = "\n".join(lines[:3])
            if not re.match(r"^(//|/\*)", lines[0]) or path not in head:
                errors.append(f"{path}: must open with a comment naming it and its concern "
                              f"(e.g. '// {path}: ...')")
    return errors, count


def main():
    os.chdir(os.path.dirname(os.path.abspath(__file__)) + "/../..")
    errors = []
    if "--no_query" not in sys.argv:
        dep_errors, rules = check_deps()
        errors += dep_errors
        print(f"check_layout: {rules} targets checked against the dependency rule")
    file_errors, files = check_files()
    errors += file_errors
    print(f"check_layout: {files} source files checked (size, opening comment)")
    for e in errors:
        print("check_layout: " + e, file=sys.stderr)
    if errors:
        print(f"check_layout: {len(errors)} problem(s); see docs/ARCHITECTURE.md, 'Layout rules'",
              file=sys.stderr)
        return 1
    print("check_layout: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
