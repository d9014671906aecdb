#!/usr/bin/env python3
"""Creates a blob container on an Azurite at ENDPOINT (http://HOST:PORT/ACCOUNT), signed with
the emulator's well-known account key (Shared Key, as Azure's SDKs sign): what object_store
cannot do. Usage: azure_container.py ENDPOINT CONTAINER. Exit 0 when it exists afterwards."""
import base64
import hashlib
import hmac
import sys
import urllib.error
import urllib.request
from email.utils import formatdate

# Azurite's documented development account and key.
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def main():
    endpoint, container = sys.argv[1].rstrip("/"), sys.argv[2]
    path = endpoint.split("://", 1)[1].split("/", 1)[1]  # ACCOUNT
    date = formatdate(usegmt=True)
    version = "2021-08-06"
    # Content-Length is empty for a body of 0 bytes (versions since 2015-02-21).
    to_sign = "\n".join(
        ["PUT"] + [""] * 11 + [f"x-ms-date:{date}", f"x-ms-version:{version}",
                               f"/{ACCOUNT}/{path}/{container}\nrestype:container"]
    )
    sig = base64.b64encode(
        hmac.new(base64.b64decode(KEY), to_sign.encode(), hashlib.sha256).digest()
    ).decode()
    req = urllib.request.Request(
        f"{endpoint}/{container}?restype=container",
        method="PUT",
        headers={
            "x-ms-date": date,
            "x-ms-version": version,
            "Authorization": f"SharedKey {ACCOUNT}:{sig}",
            "Content-Length": "0",
        },
    )
    try:
        urllib.request.urlopen(req, timeout=30)
    except urllib.error.HTTPError as e:
        if e.code != 409:  # already there
            sys.exit(f"{e.code} {e.read().decode(errors='replace')}")


if __name__ == "__main__":
    main()
