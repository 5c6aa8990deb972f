"""A TFJob replica that needs only Python: proves TF_CONFIG and the ports are right.

Run it with `tfjob run examples/ping/job.yaml` (from any folder). Roles, read from
TF_CONFIG's `task`:
- ps: listens on its TF_CONFIG address; collects one index from each worker and, once
  all have reported, tells the chief their sum. Like a real PS it never exits.
- worker i: listens on its own TF_CONFIG address, reports i to the PS, then waits
  for the chief's "ping" and answers "pong i".
- chief: asks the PS for the sum, checks it is 0+1+...+(workers-1), then pings every
  worker at its TF_CONFIG address. Exits 0 only if every answer is right.

Each replica also checks that its own TF_CONFIG address ends in TFJOB_PORT. Peers
start in any order, so connections are retried for a while.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time

CONNECT_FOR = 30.0  # seconds of retrying while peers start
TIMEOUT = 60.0


def main() -> int:
    config = json.loads(os.environ["TF_CONFIG"])
    cluster, task = config["cluster"], config["task"]
    role, index = task["type"], task["index"]
    own = cluster[role][index]
    if own.rsplit(":", 1)[1] != os.environ["TFJOB_PORT"]:
        print(f"TF_CONFIG says {own} but TFJOB_PORT is {os.environ['TFJOB_PORT']}")
        return 1
    server = listen(own)
    print(f"{role} {index} listening on {own}")
    if role == "ps":
        return serve_ps(server, workers=len(cluster.get("worker", [])))
    if role == "worker":
        return run_worker(server, index, ps=cluster["ps"][0])
    return run_chief(ps=cluster["ps"][0], workers=cluster.get("worker", []))


def listen(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, int(port)))
    server.listen()
    return server


def connect(address: str) -> socket.socket:
    """Connect to a peer, retrying while it may still be starting."""
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + CONNECT_FOR
    while True:
        try:
            return socket.create_connection((host, int(port)), timeout=TIMEOUT)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def ask(address: str, message: str) -> str:
    with connect(address) as peer:
        peer.sendall(message.encode() + b"\n")
        return peer.makefile().readline().strip()


def serve_ps(server: socket.socket, workers: int) -> int:
    reported: set[int] = set()
    all_in = threading.Condition()

    def handle(peer: socket.socket) -> None:
        with peer, peer.makefile("rw") as stream:
            words = stream.readline().split()
            with all_in:
                if words[:1] == ["worker"]:
                    reported.add(int(words[1]))
                    all_in.notify_all()
                    reply = "ok"
                else:  # the chief asks for the sum once every worker reported
                    all_in.wait_for(lambda: len(reported) == workers, TIMEOUT)
                    reply = str(sum(reported))
            stream.write(reply + "\n")

    while True:
        peer, _ = server.accept()
        threading.Thread(target=handle, args=(peer,), daemon=True).start()


def run_worker(server: socket.socket, index: int, ps: str) -> int:
    if ask(ps, f"worker {index}") != "ok":
        print("the PS did not take my index")
        return 1
    server.settimeout(TIMEOUT)
    peer, _ = server.accept()
    with peer, peer.makefile("rw") as stream:
        if stream.readline().strip() != "ping":
            return 1
        # Printed before answering: once the chief has its answer the job may succeed
        # and this replica be stopped.
        print(f"worker {index} got the chief's ping")
        stream.write(f"pong {index}\n")
    return 0


def run_chief(ps: str, workers: list[str]) -> int:
    total, expected = ask(ps, "sum"), sum(range(len(workers)))
    print(f"chief got sum {total} from the PS (expected {expected})")
    if total != str(expected):
        return 1
    for index, address in enumerate(workers):
        answer = ask(address, "ping")
        if answer != f"pong {index}":
            print(f"worker {index} at {address} answered {answer!r}")
            return 1
    print(f"chief reached all {len(workers)} workers: TF_CONFIG and ports are right")
    return 0


if __name__ == "__main__":
    sys.exit(main())
