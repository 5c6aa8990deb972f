"""The local replicas' ports (runtimes/local/ports.py): free, distinct, and outside
the ranges where a connection's own port or a NodePort rule could take them."""

from __future__ import annotations

import contextlib
import random
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.builders import job, replica
from tfjob.runtimes.local import ports

LINUX_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
FIRST_EPHEMERAL = int(LINUX_RANGE.read_text().split()[0]) if LINUX_RANGE.exists() else 49152


def _numbers(addresses: dict[str, list[str]]) -> list[int]:
    return [int(a.rsplit(":", 1)[1]) for each in addresses.values() for a in each]


def test_each_replica_has_its_own_port_below_the_ephemeral_and_node_ports() -> None:
    addresses = ports.pick_addresses(job(Chief=replica(1), Worker=replica(3), PS=replica(2)))
    assert {key: len(each) for key, each in addresses.items()} == {
        "chief": 1,
        "worker": 3,
        "ps": 2,
    }
    assert all(a.startswith("127.0.0.1:") for each in addresses.values() for a in each)
    numbers = _numbers(addresses)
    assert len(set(numbers)) == 6
    top = min(ports.HIGHEST, FIRST_EPHEMERAL)
    assert all(ports.LOWEST <= n < top for n in numbers), (numbers, FIRST_EPHEMERAL)


@contextlib.contextmanager
def _listening_beside_a_free_port() -> Iterator[int]:
    """A port another program listens on whose next port is free."""
    for _ in range(100):
        port = random.randrange(ports.LOWEST, min(ports.HIGHEST, FIRST_EPHEMERAL) - 1)
        taken = socket.socket()
        try:
            taken.bind(("127.0.0.1", port))
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", port + 1))
        except OSError:
            taken.close()
            continue
        taken.listen()
        with taken:
            yield port
        return
    pytest.fail("no two free ports side by side below the ephemeral range")


def test_a_port_in_use_is_skipped_and_the_kernel_picks_when_none_is_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with _listening_beside_a_free_port() as taken:
        # Only `taken` and the port after it to pick from.
        monkeypatch.setattr(ports, "LOWEST", taken)
        monkeypatch.setattr(ports, "HIGHEST", taken + 2)
        first, second = ports.free_ports(2)
    assert first == taken + 1
    assert second >= FIRST_EPHEMERAL  # the kernel's: the range had no free port left


def test_without_linuxs_range_file_the_ports_stay_below_ianas_dynamic_range(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", tmp_path / "absent")
    numbers = ports.free_ports(4)
    assert all(ports.LOWEST <= n < ports.HIGHEST for n in numbers)
    unreadable = tmp_path / "range"
    unreadable.write_text("not numbers\n")
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", unreadable)
    assert all(n >= FIRST_EPHEMERAL for n in ports.free_ports(2))  # the kernel's picks
