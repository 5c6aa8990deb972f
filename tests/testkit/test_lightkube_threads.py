"""testkit/lightkube_threads.py: lightkube used from several threads of a fresh
process at once (as the Kueue lanes do) decodes right and does not crash it.

Without the lock, msgspec 0.22 crashed this child in 137 of 150 runs (a segmentation
fault while two threads built one class's decoder)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Six threads released at once, each decoding for the first time in this process: a
# Pod from a response body, or a Node from a dict (`codecs.from_dict`).
CHILD = """
import json, sys, threading
sys.path.insert(0, sys.argv[1])
from testkit.lightkube_threads import decode_one_at_a_time
decode_one_at_a_time()
from lightkube import codecs
from lightkube.core import decoders
from lightkube.resources.core_v1 import Pod
node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}
pod = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                  "spec": {"containers": [{"name": "c", "image": "i"}]}}).encode()
start = threading.Barrier(6)
names = []
def decode(i):
    start.wait()
    got = codecs.from_dict(node) if i % 2 else decoders.decode_object(pod, Pod)
    names.append(got.metadata.name)
threads = [threading.Thread(target=decode, args=(i,)) for i in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sorted(names))
"""


def test_six_threads_decode_at_once_in_a_fresh_process() -> None:
    for _ in range(5):
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(ROOT)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
        assert done.stdout.split("\n")[0] == str(["n", "n", "n", "p", "p", "p"])
