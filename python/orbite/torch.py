"""The torch.distributed backend "orbite".

Importing this module registers the backend with torch (1.13's c10d plugin API)::

    import orbite.torch
    orbite.torch.init_process_group()          # any launcher, see below
    # or, under torchrun: torch.distributed.init_process_group("orbite")

Each process group is an OrbiTE communicator bootstrapped from the c10d store torch hands the
backend; every group of a process shares one OrbiTE TransferEngine. CPU tensors of float32,
float64, float16, bfloat16, int8, uint8, int32 and int64; SUM, PRODUCT, MIN, MAX and AVG.
"""

import os

import torch  # noqa: F401  (torch's c10d classes must exist before orbite._torch loads)
import torch.distributed as dist

from . import _core
from . import _torch
from ._torch import ProcessGroupOrbite  # noqa: F401

BACKEND = "orbite"

__all__ = ["BACKEND", "ProcessGroupOrbite", "init_process_group", "transport_bytes"]


def _create(store, rank, size, timeout):
    return _torch.ProcessGroupOrbite(store, rank, size, timeout)


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create)

_inits = 0  # how many times this process made a store here; every rank counts alike


def init_process_group(backend=BACKEND, timeout=None, **kwargs):
    """torch.distributed.init_process_group under any launcher.

    With torchrun (MASTER_ADDR and MASTER_PORT set), or when ``init_method`` or ``store`` is
    given, this is torch's own call. Under orbite-run, mpirun or Slurm, rank and size come from
    OrbiTE's bootstrap; rank 0 starts a torch TCPStore on a free port and hands its address to the
    others through OrbiTE's bootstrap store. ``timeout`` (a timedelta, default torch's 30
    minutes) bounds the store and every operation of the group.
    """
    global _inits
    if timeout is None:
        timeout = dist.default_pg_timeout
    if ("init_method" in kwargs or "store" in kwargs
            or ("MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ)):
        dist.init_process_group(backend, timeout=timeout, **kwargs)
        return
    boot = _core.Bootstrap.default()
    rank, size = boot.rank, boot.world_size
    key = f"torch/store/{_inits}"
    _inits += 1
    if rank == 0:
        store = dist.TCPStore("0.0.0.0", 0, size, True, timeout=timeout, wait_for_workers=False)
        host = _advertised_host(boot)
        boot.store.set(key, f"{host}:{store.port}".encode())
    else:
        address = boot.store.get(key, timeout.total_seconds()).decode()
        host, port = address.rsplit(":", 1)
        store = dist.TCPStore(host, int(port), size, False, timeout=timeout)
    dist.init_process_group(backend, store=store, rank=rank, world_size=size, timeout=timeout,
                            **kwargs)


def _advertised_host(boot):
    # orbite-run's store listens on loopback when every rank is local: so does the job then.
    store_host = boot.store_address.rsplit(":", 1)[0].strip("[]")
    if store_host in ("127.0.0.1", "::1", "localhost", ""):
        return "127.0.0.1"
    import socket
    return socket.getfqdn()


def transport_bytes(group=None):
    """Payload bytes this process's OrbiTE engine sent and received per transport ({"tcp": n,
    "shm": n, ...}), shared by all its orbite groups: which transport carried the bytes. A byte
    that one side copied alone (single copy between ranks of one host) counts on that side."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupOrbite):
        raise ValueError(f"transport_bytes: {type(pg).__name__} is not an orbite process group")
    return pg.transport_bytes()

