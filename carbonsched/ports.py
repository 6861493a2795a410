"""Free TCP ports on loopback, for the servers the tests, benchmarks and ``scripts/`` start.

:func:`free_port` asks the operating system for one port from its ephemeral range;
:func:`free_port_block` finds a run of consecutive free ports (the Slurm clusters and the
Kubernetes emulator of ``scripts/services.sh`` take 100 from a base). Neither scans a fixed
range from its start: two runs sharing a machine would both take its first port, and one run's
readiness check would find the other's server.

``python -m carbonsched.ports`` prints one free port, ``python -m carbonsched.ports --block 100``
the base of 100 free consecutive ports (``scripts/services.sh`` uses both).
"""

from __future__ import annotations

import argparse
import random
import socket

LOOPBACK = "127.0.0.1"

BLOCK_RANGE = (20000, 32000)
"""Where :func:`free_port_block` looks for a block: below Linux's default ephemeral range
(32768-60999, ``/proc/sys/net/ipv4/ip_local_port_range``), so ports the OS hands to outgoing
connections and to :func:`free_port` do not land in a block while its servers start, and above
the registered ports most system services use."""


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that is free now, picked by the operating system.

    Parameters
    ----------
    host
        Interface address.

    Returns
    -------
    int
        The port (free when this returns; the caller binds it next).
    """
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port_block(size: int, host: str = LOOPBACK, low: int = BLOCK_RANGE[0],
                    high: int = BLOCK_RANGE[1], attempts: int = 200,
                    rng: random.Random | None = None) -> int:
    """The first of ``size`` consecutive TCP ports on ``host`` that are all free now.

    Bases are drawn at random (multiples of ``size`` in ``[low, high - size]``), so two runs
    on one machine rarely try the same block, and each port of a drawn block is bound and
    released to check it.

    Parameters
    ----------
    size
        Ports in the block, >= 1.
    host
        Interface address.
    low, high
        The block lies in ``[low, high)``. [port numbers]
    attempts
        Blocks tried before giving up.
    rng
        Random source (default: a fresh :class:`random.Random`).

    Returns
    -------
    int
        The block's first port.

    Raises
    ------
    ValueError
        ``size`` < 1, or no block of ``size`` fits in ``[low, high)``.
    OSError
        No free block found in ``attempts`` tries.
    """
    if size < 1:
        raise ValueError(f"size {size} must be >= 1")
    bases = list(range(low - low % size + (size if low % size else 0), high - size + 1, size))
    if not bases:
        raise ValueError(f"no block of {size} ports fits in [{low}, {high})")
    rng = rng or random.Random()
    for _ in range(attempts):
        base = rng.choice(bases)
        if all(_bindable(host, p) for p in range(base, base + size)):
            return base
    raise OSError(f"no {size} consecutive free ports on {host} in [{low}, {high}) after "
                  f"{attempts} tries; free some or set the port explicitly")


def main(argv: list[str] | None = None) -> None:
    """Print a free port, or with ``--block N`` the first of N consecutive free ports."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--block", type=int, default=0, help="size of a block of ports")
    ap.add_argument("--host", default=LOOPBACK)
    args = ap.parse_args(argv)
    print(free_port_block(args.block, args.host) if args.block else free_port(args.host))


if __name__ == "__main__":
    main()
