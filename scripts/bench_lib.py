#!/usr/bin/env python3
"""Helpers of scripts/bench-prune.sh and scripts/bench-scale.sh (standard library only).

  bench_lib.py prune-lists WORK NS PER_WAVE          JSON Lists of 4 depends-on waves (w1 -> w2 -> w3 -> w4)
  bench_lib.py kpt-package DIR NS PER_WAVE           the same objects as one YAML file of a kpt package
  bench_lib.py scale-lists WORK PREFIX TOTAL         TOTAL Flux-tracked ConfigMaps over 10 namespaces
  bench_lib.py scale-manifest FILE PREFIX TOTAL      the same objects as one YAML stream (the desired set)
  bench_lib.py floor NS PER_WAVE [CONCURRENCY]       the parallel floor: plain HTTP DELETEs, 16 at once,
                                                     wave by wave (ConfigMaps go at once: a 200 is gone)
  bench_lib.py run OUT -- CMD...                     runs CMD under /usr/bin/time -v; writes OUT.json with
                                                     the seconds, the peak RSS and a timeline of its lines
  bench_lib.py table RESULTS [README MARKER]         prints the rows as a markdown table (and replaces the
                                                     block between <!-- MARKER --> and <!-- /MARKER -->)
"""
import http.client
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

WAVES = 4
FLUX = {"kustomize.toolkit.fluxcd.io/name": "scale", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}


def prune_objects(ns, per_wave):
    for wave in range(1, WAVES + 1):
        for i in range(per_wave):
            meta = {"name": f"w{wave}-{i}", "namespace": ns, "labels": {"bench": "prune", "wave": str(wave)}}
            if wave < WAVES:
                meta["annotations"] = {"config.kubernetes.io/depends-on": f"/namespaces/{ns}/ConfigMap/w{wave + 1}-{i}"}
            yield {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def prune_lists(work, ns, per_wave):
    items = list(prune_objects(ns, int(per_wave)))
    for c in range(4):
        with open(f"{work}/{ns}-{c}.json", "w") as f:
            json.dump({"apiVersion": "v1", "kind": "List", "items": items[c::4]}, f)


def kpt_package(directory, ns, per_wave):
    with open(os.path.join(directory, "objects.yaml"), "w") as f:
        for item in prune_objects(ns, int(per_wave)):
            del item["metadata"]["labels"]
            f.write("---\n" + json.dumps(item) + "\n")


def scale_objects(prefix, total):
    for i in range(int(total)):
        meta = {"name": f"cm-{i}", "namespace": f"{prefix}-{i % 10}", "labels": FLUX}
        yield {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def scale_lists(work, prefix, total):
    items = list(scale_objects(prefix, total))
    for c in range(0, len(items), 2000):
        with open(f"{work}/c{c // 2000}.json", "w") as f:
            json.dump({"apiVersion": "v1", "kind": "List", "items": items[c : c + 2000]}, f)


def scale_manifest(path, prefix, total):
    with open(path, "w") as f:
        for item in scale_objects(prefix, total):
            f.write("---\n" + json.dumps(item) + "\n")


def connection_factory():
    config = json.loads(subprocess.check_output(["kubectl", "config", "view", "--minify", "--raw", "-o", "json"]))
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    context = ssl.create_default_context(cafile=cluster.get("certificate-authority"))
    if "client-certificate" in user:
        context.load_cert_chain(user["client-certificate"], user["client-key"])
    headers = {"Authorization": f"Bearer {user['token']}"} if "token" in user else {}
    host, port = re.match(r"https://([^:/]+):?(\d+)?", cluster["server"]).groups()

    def connect():
        return http.client.HTTPSConnection(host, int(port or 443), context=context)

    return connect, headers


def floor(ns, per_wave, concurrency="16"):
    connect, headers = connection_factory()
    local = threading.local()

    def delete(name):
        if not hasattr(local, "conn"):
            local.conn = connect()
        local.conn.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps/{name}", headers=headers)
        response = local.conn.getresponse()
        response.read()
        if response.status not in (200, 202, 404):
            raise SystemExit(f"DELETE {name}: {response.status}")

    started = time.monotonic()
    with ThreadPoolExecutor(int(concurrency)) as pool:
        for wave in range(1, WAVES + 1):
            list(pool.map(delete, [f"w{wave}-{i}" for i in range(int(per_wave))]))
    print(f"{time.monotonic() - started:.3f}")


def run(out, *command):
    """Runs the command under /usr/bin/time -v, stamping each line of its output."""
    command = [c for c in command if c != "--"]
    with tempfile.NamedTemporaryFile("r", suffix=".time") as timing:
        started = time.monotonic()
        process = subprocess.Popen(
            ["/usr/bin/time", "-v", "-o", timing.name, *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines = []

        def read(stream, name):
            for line in stream:
                lines.append((time.monotonic() - started, name, line.rstrip("\n")))

        readers = [threading.Thread(target=read, args=(s, n)) for s, n in ((process.stdout, "out"), (process.stderr, "err"))]
        for reader in readers:
            reader.start()
        code = process.wait()
        seconds = time.monotonic() - started
        for reader in readers:
            reader.join()
        rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", timing.read())
    lines.sort()
    result = {
        "seconds": seconds,
        "rss_kib": int(rss.group(1)) if rss else 0,
        "code": code,
        "out_lines": sum(1 for _, n, _ in lines if n == "out"),
        "timeline": timeline(lines),
    }
    with open(out + ".json", "w") as f:
        json.dump(result, f)
    with open(out + ".log", "w") as f:
        f.writelines(f"{t:8.3f} {n} {l}\n" for t, n, l in lines)


def timeline(lines):
    """Plan (until the plan is printed), then each wave's re-check (from the previous wave's end
    to `wave N/M: deleting`) and deletes + wait (to `wave N: gone`)."""
    plan = next((t for t, n, _ in lines if n == "out"), None)
    marks, previous = [], plan
    for t, n, line in lines:
        if n != "err":
            continue
        if re.match(r"wave \d+/\d+: deleting", line):
            marks.append({"recheck": t - (previous or 0), "start": t})
        elif re.match(r"wave \d+: gone", line) and marks:
            marks[-1]["wave"] = t - marks[-1]["start"]
            previous = t
    return {"plan": plan, "waves": marks}


def describe(result):
    return f"{result['seconds']:.2f} s, {result['rss_kib'] / 1024:.0f} MB"


def table(results, readme=None, marker=None):
    """RESULTS: one JSON object a line: {work, stack, before?, baseline?, baseline_name?, note?}.
    Prints the table (with a "before" column when a row has one); README gets it without that
    column (the binary measured beside its baselines)."""
    rows = [json.loads(line) for line in open(results) if line.strip()]
    print(render(rows, any("before" in r for r in rows)), end="")
    if readme:
        source = open(readme).read()
        begin, end = f"<!-- {marker} -->\n", f"<!-- /{marker} -->"
        if begin in source and end in source:
            head_part, rest = source.split(begin, 1)
            _, tail = rest.split(end, 1)
            with open(readme, "w") as f:
                f.write(head_part + begin + render(rows, False) + end + tail)


def render(rows, with_before):
    head = ["work", "kubectl-stack"] + (["before (baseline binary)"] if with_before else []) + ["baseline", "ratio"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["work"], cell(r.get("stack"))]
        if with_before:
            cells.append(cell(r.get("before")))
        base = r.get("baseline")
        cells.append(f"{r.get('baseline_name', '')} {cell(base)}".strip() if base else "—")
        cells.append(ratio(r.get("stack"), base))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def cell(value):
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if "text" in value:
        return value["text"]
    return describe(value)


def ratio(stack, base):
    if not isinstance(stack, dict) or not isinstance(base, dict) or "seconds" not in stack or "seconds" not in base:
        return "—"
    r = stack["seconds"] / base["seconds"]
    return f"{r:.2f}× the time" if r >= 1 else f"{1 / r:.1f}× faster"


if __name__ == "__main__":
    commands = {
        "prune-lists": prune_lists,
        "kpt-package": kpt_package,
        "scale-lists": scale_lists,
        "scale-manifest": scale_manifest,
        "floor": floor,
        "run": run,
        "table": table,
    }
    commands[sys.argv[1]](*sys.argv[2:])
