"""The MPI ssh key pair a TrainJob's Secret holds (tfjob.runtimes.mpi_keys): the forms
Trainer's Secret has, a private key that signs what its public line verifies, and a
new pair each time."""

from __future__ import annotations

import base64
import shutil
import struct
import subprocess
from pathlib import Path

import ecdsa
import pytest

from tfjob.runtimes.mpi_keys import new_key_pair


def _strings(blob: bytes) -> list[bytes]:
    parts = []
    while blob:
        (length,) = struct.unpack(">I", blob[:4])
        parts.append(blob[4 : 4 + length])
        blob = blob[4 + length :]
    return parts


def test_the_private_key_signs_what_the_authorized_key_verifies() -> None:
    pair = new_key_pair()
    assert pair.private_pem.startswith(b"-----BEGIN EC PRIVATE KEY-----\n")
    private = ecdsa.SigningKey.from_pem(pair.private_pem)
    assert private.curve == ecdsa.NIST521p
    kind, encoded = pair.public_authorized_key.rstrip(b"\n").split(b" ")
    assert kind == b"ecdsa-sha2-nistp521"
    key_type, curve, point = _strings(base64.b64decode(encoded))
    assert (key_type, curve) == (b"ecdsa-sha2-nistp521", b"nistp521")
    public = ecdsa.VerifyingKey.from_string(point, curve=ecdsa.NIST521p)
    assert public.verify(private.sign(b"mpirun"), b"mpirun")


def test_every_pair_is_new() -> None:
    assert new_key_pair().private_pem != new_key_pair().private_pem


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="no ssh-keygen (openssh-client)")
def test_ssh_keygen_reads_both_halves_as_one_key(tmp_path: Path) -> None:
    pair = new_key_pair()
    private = tmp_path / "id_ecdsa"
    private.write_bytes(pair.private_pem)
    private.chmod(0o600)
    derived = subprocess.run(
        ["ssh-keygen", "-y", "-f", str(private)], capture_output=True, check=True
    ).stdout
    assert derived.split()[:2] == pair.public_authorized_key.split()[:2]
