"""The MPI ssh key pair of a TrainJob's Secret, made by a runtime (randomness is an
input of the core: frameworks.mlpolicy.base.KeyPair); both runtimes use it.

As Trainer's MPI plugin makes it: an ECDSA key on P-521, the private key as PEM
("EC PRIVATE KEY", SEC 1) and the public key as an authorized_keys line. Made only
when a plan asks for one (`TrainJobPlan.needs_key_pair`): a Secret is immutable and
made once. With python-ecdsa (pure Python, 150 kB) rather than `cryptography`,
whose 16 MB would take the image over its size limit (docs/decisions/0033).
"""

from __future__ import annotations

import base64
import struct

from tfjob.frameworks.mlpolicy.base import KeyPair

SSH_KEY_TYPE = b"ecdsa-sha2-nistp521"
SSH_CURVE = b"nistp521"


def new_key_pair() -> KeyPair:
    """A fresh key pair (the operating system's random source, os.urandom)."""
    import ecdsa  # here: only MPI TrainJobs need it, and its import costs ~0.5 MB

    key = ecdsa.SigningKey.generate(curve=ecdsa.NIST521p)
    point = key.get_verifying_key().to_string("uncompressed")
    return KeyPair(
        private_pem=key.to_pem(format="ssleay"),
        public_authorized_key=authorized_key(point),
    )


def authorized_key(point: bytes) -> bytes:
    """An authorized_keys line for an uncompressed P-521 point (RFC 5656's wire form:
    the key type, the curve and the point, each a length-prefixed string)."""
    blob = b"".join(
        struct.pack(">I", len(part)) + part for part in (SSH_KEY_TYPE, SSH_CURVE, point)
    )
    return SSH_KEY_TYPE + b" " + base64.b64encode(blob) + b"\n"
