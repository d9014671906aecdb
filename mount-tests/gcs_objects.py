#!/usr/bin/env python3
"""Puts and deletes objects on fake-gcs-server through its JSON API, which object_store's
writes (XML API PUT) do not reach. Usage: gcs_objects.py ENDPOINT BUCKET, then on standard
input one line per object, in order: `PUT<TAB>KEY<TAB>FILE` or `DELETE<TAB>KEY`. Exit 0 when all are done."""
import sys
import urllib.parse
import urllib.request


def main():
    endpoint, bucket = sys.argv[1].rstrip("/"), sys.argv[2]
    for line in sys.stdin:
        op, rest = line.rstrip("\n").split("\t", 1)
        if op == "PUT":
            key, path = rest.split("\t", 1)
            with open(path, "rb") as f:
                data = f.read()
            q = urllib.parse.urlencode({"uploadType": "media", "name": key})
            url = f"{endpoint}/upload/storage/v1/b/{bucket}/o?{q}"
            req = urllib.request.Request(url, data=data, method="POST")
        else:
            key = urllib.parse.quote(rest, safe="")
            req = urllib.request.Request(f"{endpoint}/storage/v1/b/{bucket}/o/{key}", method="DELETE")
        urllib.request.urlopen(req, timeout=60).read()


if __name__ == "__main__":
    main()
