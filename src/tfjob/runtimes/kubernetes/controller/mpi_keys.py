"""The MPI ssh key pair of a TrainJob's Secret, made in the shell (randomness is an
input of the core: frameworks.mlpolicy.base.KeyPair).

As Trainer's MPI plugin makes it: an ECDSA key on P-521, the private key as PEM
("EC PRIVATE KEY", SEC 1) and the public key as an authorized_keys line. Made only
when a plan asks for one (`TrainJobPlan.needs_key_pair`): a Secret is immutable and
made once.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tfjob.frameworks.mlpolicy.base import KeyPair


def new_key_pair() -> KeyPair:
    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return KeyPair(private_pem=private, public_authorized_key=public + b"\n")
