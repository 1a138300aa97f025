#!/usr/bin/env python3
"""mirror: a small Kubernetes controller in Python with only the standard
library, the example of a controller not written in Go that stalefuzz runs
from a target file (target.yaml).

For every ConfigMap labelled app=mirror in $WATCH_NAMESPACE it copies
data.desired to data.observed, from an informer-like cache: one LIST with
resourceVersion=0 (as client-go's reflector lists: any version, served from
the apiserver's watch cache, which may lag etcd), then a WATCH from the
list's resourceVersion; a watch that ends or answers 410 Gone
means a relist. It writes with PUT of its cached copy:
  MODE=optimistic  keeps metadata.resourceVersion: a stale copy meets a 409
                   Conflict, and the next event brings a fresh one;
  MODE=blind       drops metadata.resourceVersion (an unconditional update):
                   a stale copy overwrites whatever changed since, as a
                   client that "just updates" does.
RETRY=same makes it, on a 409 Conflict, send the same stale copy again every
100 ms instead of waiting for the next event: a retry loop that never
rereads, the storm oracle's example (its writes go on and get nowhere).
CRASH_ON, when set, makes it exit as a Go controller's panic would when
data.desired equals it: the example of a crash for the crash oracle.
Its kubeconfig ($KUBECONFIG) is read for the three fields it needs: server,
certificate-authority-data and token.
"""
import base64
import json
import os
import re
import ssl
import sys
import time
import urllib.error
import urllib.request


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def kubeconfig(path):
    text = open(path).read()
    field = lambda name: re.search(r"^\s*" + name + r":\s*(\S+)\s*$", text, re.M).group(1)
    return field("server"), base64.b64decode(field("certificate-authority-data")).decode(), field("token")


SERVER, CA, TOKEN = kubeconfig(os.environ["KUBECONFIG"])
NAMESPACE = os.environ["WATCH_NAMESPACE"]
MODE = os.environ.get("MODE", "optimistic")
CTX = ssl.create_default_context(cadata=CA)
BASE = f"{SERVER}/api/v1/namespaces/{NAMESPACE}/configmaps"


def request(method, url, body=None):
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode())
    req.add_header("Authorization", "Bearer " + TOKEN)
    req.add_header("Accept", "application/json")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    return urllib.request.urlopen(req, context=CTX, timeout=60)


def reconcile(cache, name):
    obj = cache.get(name)
    if obj is None:
        return
    data = obj.get("data") or {}
    if os.environ.get("CRASH_ON") and data.get("desired") == os.environ["CRASH_ON"]:
        log(f"panic: desired value {data.get('desired')!r} of {name} is not supported")
        sys.exit(2)
    if data.get("observed") == data.get("desired"):
        return
    new = json.loads(json.dumps(obj))
    new.setdefault("data", {})["observed"] = data.get("desired")
    if MODE == "blind":
        new["metadata"].pop("resourceVersion", None)
    while True:
        try:
            with request("PUT", f"{BASE}/{name}", new) as resp:
                cache[name] = json.load(resp)
            log(f"mirrored {name}: observed={data.get('desired')!r}")
        except urllib.error.HTTPError as e:
            if e.code == 409 and os.environ.get("RETRY") == "same":
                log(f"update {name}: {e.code} {e.reason}: trying the same copy again")
                time.sleep(0.1)
                continue
            log(f"update {name}: {e.code} {e.reason}: waiting for the next event")
        return


def main():
    cache = {}
    while True:
        try:
            with request("GET", f"{BASE}?labelSelector=app%3Dmirror&resourceVersion=0") as resp:
                lst = json.load(resp)
        except (urllib.error.URLError, OSError, ValueError) as e:
            log(f"list: {e}: trying again")
            time.sleep(0.1)
            continue
        cache = {o["metadata"]["name"]: o for o in lst["items"]}
        for name in list(cache):
            reconcile(cache, name)
        rv = lst["metadata"]["resourceVersion"]
        url = f"{BASE}?labelSelector=app%3Dmirror&watch=1&allowWatchBookmarks=true&resourceVersion={rv}"
        try:
            with request("GET", url) as stream:
                for line in stream:
                    ev = json.loads(line)
                    obj = ev["object"]
                    if ev["type"] == "ERROR":
                        log(f"watch: {obj.get('code')} {obj.get('reason')}: relisting")
                        break
                    if ev["type"] == "BOOKMARK":
                        continue
                    name = obj["metadata"]["name"]
                    if ev["type"] == "DELETED":
                        cache.pop(name, None)
                    else:
                        cache[name] = obj
                        reconcile(cache, name)
        except (urllib.error.URLError, OSError, ValueError) as e:
            log(f"watch ended: {e}: relisting")


if __name__ == "__main__":
    main()
