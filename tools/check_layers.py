#!/usr/bin/env python3
"""Prints every include under SRC that breaks OrbiTE's layering; exits 1 if it printed any.

Layers, bottom to top: common < platform < cuda < bootstrap, topo < p2p < proxy < coll < comm. A file
includes only its own layer and those below; coll uses p2p only for the request state (never a
transport's folder or the control channel) and never the proxy. A transport's folder
(p2p/tcp, p2p/shm, p2p/rdma, p2p/cuda) is included only from inside it and from the transport
table, p2p/transports.cpp. Above p2p, only its face (P2P_FACE) is visible. The build enforces
the layer order too (src/CMakeLists.txt); this
also catches the relative includes and the rules within a layer that the build cannot see.
"""
import os
import re
import sys

RANK = {"common": 1, "platform": 2, "cuda": 3, "bootstrap": 4, "topo": 4, "p2p": 5, "proxy": 6,
        "coll": 7, "comm": 8}
TRANSPORTS = ("tcp", "shm", "rdma", "cuda")
# What the layers above p2p may include of it: the request state, endpoints, regions, counters,
# the contract's types, a lane's protocol as an interface, the memory domains, the descriptor
# codec, the selection table, the batch's range merging and the box of notifications peers
# delivered. No socket, ring, stream, endpoint or peer-link type.
P2P_FACE = {"request.h", "endpoint.h", "registry.h", "counters.h", "transport.h", "lane.h",
            "domains.h", "descriptor.h", "select.h", "ranges.h", "notifications.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path, root):
    rel = os.path.relpath(path, root).split(os.sep)
    return rel[0], rel


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "src"
    bad = 0
    for layer in RANK:
        for d, _, files in os.walk(os.path.join(root, layer)):
            for f in sorted(files):
                if not f.endswith((".h", ".cpp")):
                    continue
                path = os.path.join(d, f)
                _, rel = layer_of(path, root)
                with open(path, errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        if target.startswith(".."):
                            target = os.path.normpath(os.path.join(os.path.dirname(
                                os.path.relpath(path, root)), target))
                        parts = target.split("/")
                        if parts[0] not in RANK:
                            continue
                        why = None
                        if RANK[parts[0]] > RANK[layer]:
                            why = "a higher layer"
                        elif layer == "coll" and parts[0] == "proxy":
                            why = "the proxy"
                        elif layer == "coll" and parts[0] == "p2p" and parts[1:] != ["request.h"]:
                            why = "p2p beyond the request state"
                        elif (RANK[layer] > RANK["p2p"] and parts[0] == "p2p" and
                              "/".join(parts[1:]) not in P2P_FACE):
                            why = "p2p's inside (sockets, rings, streams, links)"
                        elif parts[0] == "p2p" and len(parts) > 2 and parts[1] in TRANSPORTS:
                            inside = len(rel) > 2 and rel[0] == "p2p" and rel[1] == parts[1]
                            table = rel == ["p2p", "transports.cpp"]
                            if not inside and not table:
                                why = "a transport's folder from outside it"
                        if why:
                            print(f"{path}:{n}: {layer} includes {target} ({why})")
                            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
