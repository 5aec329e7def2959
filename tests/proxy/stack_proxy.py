#!/usr/bin/env python3
"""A test proxy in front of the test cluster's kube-apiserver (Python standard library only).

Clients talk HTTPS to it (``--cert``/``--key``: the API server's own serving certificate, so
the client's kubeconfig CA still holds); it forwards to the API server over TLS. It can

* inject faults into a share of the requests (``--fault-rate``), chosen at random (``--seed``):
  before the server sees the request (429 with Retry-After, 500, 503, a connection reset) or
  after the server acted on it (the answer is replaced by a 500/503 or a reset: the client never
  learns that its DELETE succeeded);
* lose the answer of the first DELETE of every object (``--lose-first-delete-answer``), or of
  the first PATCH (``--lose-first-patch-answer``): the server acts, the client gets a reset;
* refuse every DELETE of an object named NAME with CODE (``--refuse-delete NAME=CODE``; ``*=CODE``
  refuses every DELETE), without forwarding it, as an admission webhook that denies it with that
  code does (``*=503``: an API server whose storage is down);
* forward every DELETE and never answer it (``--hang-deletes``): the server acts, the client
  waits for an answer that never comes (a hung connection);
* remove a group version while a client discovers it (``--remove-on-discovery GV=PATH``): the
  first ``GET /apis/GV`` is held while the proxy deletes PATH upstream (a CRD) and waits until the
  server no longer serves GV (404, and gone from ``/apis``); then it is forwarded (and answered 404),
  as when a CRD is deleted between a client's ``/apis`` and its ``/apis/GROUP/VERSION``;
* answer the N-th ``GET PATH`` with 404 (``--not-found-at PATH=N``), as a server answers a LIST
  of a kind whose CRD changed after the client discovered it;
* answer aggregated discovery (``--aggregated v2|v2beta1``): ``GET /api`` and ``GET /apis`` asking
  for ``application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`` get an
  APIGroupDiscoveryList composed from the 1.20 server's per-group answers, as a 1.30+ server
  answers (``v2``; it also serves v2beta1), or as a 1.26-1.29 server (``v2beta1`` only).

Every client request is logged as one JSON line to ``--log``: start and end times, method,
path, the fault injected (if any), the upstream status (if forwarded) and what the client got.
The listening port is printed on stdout once the proxy is ready.

Format of the discovery answer: k8s.io/api apidiscovery/v2 types.go (APIGroupDiscoveryList,
APIGroupDiscovery, APIVersionDiscovery, APIResourceDiscovery, APISubresourceDiscovery) and
k8s.io/apiserver pkg/endpoints/discovery/aggregated (freshness "Current"/"Stale", versions in
descending preference, content type ``application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList``).
"""

import argparse
import http.client
import http.server
import json
import random
import socket
import socketserver
import ssl
import struct
import threading
import time
import urllib.parse

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "content-length",
}

AGGREGATED_AS = "as=APIGroupDiscoveryList"


class State:
    """Shared settings, the random source and the log."""

    def __init__(self, args):
        self.args = args
        self.random = random.Random(args.seed)
        self.lock = threading.Lock()
        self.log = open(args.log, "a", buffering=1) if args.log else None
        self.deletes_seen = set()
        self.removals = dict(r.split("=", 1) for r in (args.remove_on_discovery or []))
        self.refusals = {n: int(c) for n, c in (r.split("=", 1) for r in (args.refuse_delete or []))}
        self.not_found_at = {p: int(n) for p, n in (r.rsplit("=", 1) for r in (args.not_found_at or []))}
        self.gets_seen = {}
        upstream = urllib.parse.urlsplit(args.upstream)
        self.host = upstream.hostname
        self.port = upstream.port or 443
        self.context = ssl.create_default_context(cafile=args.ca) if args.ca else ssl._create_unverified_context()
        self.local = threading.local()

    def draw(self, watch):
        """The fault for one request: None, or (when, what)."""
        with self.lock:
            if self.random.random() >= self.args.fault_rate:
                return None
            before = watch or self.random.random() < 0.5
            what = self.random.choice(["429", "500", "503", "reset"])
            return ("before" if before else "after", what)

    def first_delete(self, path):
        with self.lock:
            if path in self.deletes_seen:
                return False
            self.deletes_seen.add(path)
            return True

    def write(self, record):
        if self.log:
            with self.lock:
                self.log.write(json.dumps(record) + "\n")

    def connection(self):
        """This thread's keep-alive connection to the API server."""
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=330)
            self.local.conn = conn
        return conn

    def drop_connection(self):
        conn = getattr(self.local, "conn", None)
        if conn is not None:
            conn.close()
        self.local.conn = None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None  # set in main

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.handle_any()

    def do_POST(self):
        self.handle_any()

    def do_PUT(self):
        self.handle_any()

    def do_PATCH(self):
        self.handle_any()

    def do_DELETE(self):
        self.handle_any()

    def handle_any(self):
        state = self.state
        started = time.time()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        watch = query.get("watch", ["false"])[0] in ("true", "1")
        record = {"start": started, "method": self.command, "path": url.path, "query": url.query}
        accept = self.headers.get("Accept", "")
        aggregated = self.aggregated_version(url.path, accept)
        if aggregated:
            record["aggregated"] = aggregated
        fault = state.draw(watch)
        if state.args.lose_first_delete_answer and self.command == "DELETE" and state.first_delete(url.path):
            fault = ("after", "reset")
        if state.args.lose_first_patch_answer and self.command == "PATCH" and state.first_delete("PATCH " + url.path):
            fault = ("after", "reset")
        refusal = None
        if self.command == "DELETE":
            refusal = self.state.refusals.get(url.path.rsplit("/", 1)[-1]) or self.state.refusals.get("*")
        if self.command == "DELETE" and state.args.hang_deletes:
            self.hang(body, record)
            return
        if refusal:
            record["refused"] = refusal
            self.refuse(refusal, record)
            record["end"] = time.time()
            state.write(record)
            return
        if fault:
            record["fault"] = "%s-%s" % fault
        if self.command == "GET" and self.take_not_found(url.path):
            record["fault"] = "not-found"
            self.inject("404", record)
            record["end"] = time.time()
            state.write(record)
            return
        removal = self.removal_for(url.path)
        if removal:
            record["removed"] = self.remove(url.path, removal)
        try:
            if fault and fault[0] == "before":
                self.inject(fault[1], record)
                return
            if aggregated:
                status, headers, payload = self.compose(url.path, aggregated)
                record["upstream"] = status
                if fault:
                    self.inject(fault[1], record)
                    return
                self.reply(status, headers, payload, record)
                return
            self.forward(body, watch, fault, record)
        finally:
            record["end"] = time.time()
            state.write(record)

    # --- a group version removed under discovery ---------------------------------------------

    def removal_for(self, path):
        """The path to delete before forwarding this request, once per group version."""
        if self.command != "GET" or not path.startswith("/apis/"):
            return None
        with self.state.lock:
            return self.state.removals.pop(path[len("/apis/"):].rstrip("/"), None)

    def take_not_found(self, path):
        """Whether this GET is the one of `--not-found-at` that is answered 404."""
        with self.state.lock:
            if path not in self.state.not_found_at:
                return False
            seen = self.state.gets_seen.get(path, 0) + 1
            self.state.gets_seen[path] = seen
            return seen == self.state.not_found_at[path]

    def remove(self, path, removal):
        """Deletes `removal` upstream and waits until `path`'s group version is no longer served."""
        response = self.request_upstream("DELETE", removal, None, self.upstream_headers_json())
        response.read()
        group_version = path[len("/apis/"):].rstrip("/")
        deadline = time.time() + 60
        while time.time() < deadline:
            status, _ = self.get_json(path)
            _, groups = self.get_json("/apis")
            listed = any(
                v.get("groupVersion") == group_version
                for g in json.loads(groups).get("groups", [])
                for v in g.get("versions", [])
            )
            if status == 404 and not listed:
                return response.status
            time.sleep(0.2)
        return "still served after 60 s"

    # --- faults -------------------------------------------------------------------------------

    def inject(self, what, record):
        record["client"] = what
        if what == "reset":
            self.reset()
            return
        code = int(what)
        reason = {404: "NotFound", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}[code]
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "injected fault %d" % code,
            "reason": reason,
            "code": code,
        }
        headers = [("Content-Type", "application/json")]
        if code == 429:
            status["details"] = {"retryAfterSeconds": 1}
            headers.append(("Retry-After", "1"))
        self.reply(code, headers, json.dumps(status).encode(), None)

    def hang(self, body, record):
        """Forwards the request, logs what the server answered, and never answers the client."""
        try:
            response = self.request_upstream(self.command, self.path, body, self.upstream_headers())
            response.read()
            record["upstream"] = response.status
            record["answered"] = time.time()
        except (http.client.HTTPException, OSError) as err:
            record["upstream"] = "unreachable: %s" % err
        record["client"] = "hung"
        record["end"] = time.time()
        self.state.write(record)
        time.sleep(3600)
        self.close_connection = True

    def refuse(self, code, record):
        """Answers as an admission webhook that denies the request with `code`."""
        record["client"] = code
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'admission webhook "guard.example.com" denied the request: held',
            "reason": "",
            "code": code,
        }
        self.reply(code, [("Content-Type", "application/json")], json.dumps(status).encode(), None)

    def reset(self):
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close_connection = True
        try:
            self.connection.close()
        except OSError:
            pass

    # --- forwarding ---------------------------------------------------------------------------

    def upstream_headers(self):
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Host"] = "%s:%d" % (self.state.host, self.state.port)
        return headers

    def request_upstream(self, method, path, body, headers):
        for attempt in range(2):
            conn = self.state.connection()
            try:
                conn.request(method, path, body=body, headers=headers)
                return conn.getresponse()
            except (http.client.HTTPException, OSError):
                self.state.drop_connection()
                if attempt == 1:
                    raise
        raise RuntimeError("unreachable")

    def forward(self, body, watch, fault, record):
        try:
            response = self.request_upstream(self.command, self.path, body, self.upstream_headers())
        except (http.client.HTTPException, OSError) as err:
            record["upstream"] = "unreachable: %s" % err
            self.reset()
            return
        record["upstream"] = response.status
        record["answered"] = time.time()
        headers = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
        if watch and response.status == 200:
            self.stream(response, headers, record)
            return
        payload = response.read()
        if response.getheader("Connection", "").lower() == "close":
            self.state.drop_connection()
        if fault:
            self.inject(fault[1], record)
            return
        self.reply(response.status, headers, payload, record)

    def stream(self, response, headers, record):
        record["client"] = response.status
        self.send_response(response.status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (OSError, http.client.HTTPException):
            self.close_connection = True
        self.state.drop_connection()

    def reply(self, code, headers, payload, record):
        if record is not None:
            record["client"] = code
        self.send_response(code)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    # --- aggregated discovery -----------------------------------------------------------------

    def aggregated_version(self, path, accept):
        """The apidiscovery version to answer with, or None for a plain answer."""
        mode = self.state.args.aggregated
        if not mode or self.command != "GET" or path.rstrip("/") not in ("/api", "/apis"):
            return None
        asked = []
        for part in accept.split(","):
            fields = [f.strip() for f in part.split(";")]
            if "g=apidiscovery.k8s.io" in fields and AGGREGATED_AS in fields:
                asked += [f[2:] for f in fields if f.startswith("v=")]
        served = ["v2", "v2beta1"] if mode == "v2" else ["v2beta1"]
        for version in asked:  # the client's order is its preference
            if version in served:
                return version
        return None

    def get_json(self, path):
        response = self.request_upstream("GET", path, None, self.upstream_headers_json())
        payload = response.read()
        return response.status, payload

    def upstream_headers_json(self):
        headers = self.upstream_headers()
        headers["Accept"] = "application/json"
        return headers

    def compose(self, path, version):
        status, payload = self.get_json(path)
        if status != 200:
            return status, [("Content-Type", "application/json")], payload
        top = json.loads(payload)
        items = []
        if path.rstrip("/") == "/api":
            versions = []
            for name in top.get("versions", []):
                versions.append(self.version_entry("", name, "/api/" + name))
            items.append({"metadata": {"creationTimestamp": None}, "versions": versions})
        else:
            for group in top.get("groups", []):
                preferred = (group.get("preferredVersion") or {}).get("groupVersion")
                ordered = sorted(group.get("versions", []), key=lambda v: v["groupVersion"] != preferred)
                versions = [
                    self.version_entry(group["name"], v["version"], "/apis/" + v["groupVersion"]) for v in ordered
                ]
                items.append({"metadata": {"name": group["name"], "creationTimestamp": None}, "versions": versions})
        document = {
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/" + version,
            "metadata": {},
            "items": items,
        }
        content_type = "application/json;g=apidiscovery.k8s.io;v=%s;as=APIGroupDiscoveryList" % version
        return 200, [("Content-Type", content_type)], json.dumps(document).encode()

    def version_entry(self, group, version, path):
        status, payload = self.get_json(path)
        if status != 200:
            # What an aggregated server says about an APIService it cannot reach.
            return {"version": version, "resources": [], "freshness": "Stale"}
        listed = json.loads(payload).get("resources", [])
        resources = {}
        order = []
        for entry in listed:
            if "/" in entry["name"]:
                continue
            kind = {"group": group, "version": version, "kind": entry["kind"]}
            resource = {
                "resource": entry["name"],
                "responseKind": kind,
                "scope": "Namespaced" if entry.get("namespaced") else "Cluster",
                "singularResource": entry.get("singularName") or entry["kind"].lower(),
                "verbs": entry.get("verbs", []),
            }
            for field, key in (("shortNames", "shortNames"), ("categories", "categories")):
                if entry.get(field):
                    resource[key] = entry[field]
            resources[entry["name"]] = resource
            order.append(entry["name"])
        for entry in listed:
            if "/" not in entry["name"]:
                continue
            parent, sub = entry["name"].split("/", 1)
            if parent not in resources:
                continue
            subresource = {
                "subresource": sub,
                "responseKind": {
                    "group": entry.get("group", group),
                    "version": entry.get("version", version),
                    "kind": entry["kind"],
                },
                "verbs": entry.get("verbs", []),
            }
            resources[parent].setdefault("subresources", []).append(subresource)
        return {"version": version, "resources": [resources[n] for n in order], "freshness": "Current"}


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="https://127.0.0.1:PORT")
    parser.add_argument("--ca", help="CA certificate of the API server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lose-first-delete-answer", action="store_true")
    parser.add_argument("--lose-first-patch-answer", action="store_true")
    parser.add_argument("--hang-deletes", action="store_true")
    parser.add_argument("--aggregated", choices=["v2", "v2beta1"])
    parser.add_argument("--remove-on-discovery", action="append", metavar="GROUP/VERSION=PATH")
    parser.add_argument("--refuse-delete", action="append", metavar="NAME=CODE")
    parser.add_argument("--not-found-at", action="append", metavar="PATH=N")
    parser.add_argument("--log")
    parser.add_argument("--cert", help="serve TLS with this certificate (kubectl sends no token over plain HTTP)")
    parser.add_argument("--key", help="the certificate's key")
    args = parser.parse_args()
    Handler.state = State(args)
    server = Server(("127.0.0.1", args.port), Handler)
    if args.cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.cert, args.key)
        tls.set_alpn_protocols(["http/1.1"])
        # The handshake happens in the handler's thread, not in the accepting one.
        server.socket = tls.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
