"""OrbiTE for Python: communicators, collectives, registered memory and put/get over OrbiTE's
engine; `orbite.kv` for KV-cache transfers by address; `orbite.torch` for the torch.distributed
backend "orbite".

Run a job with the launcher and Debian's interpreter::

    build/bin/orbite-run -n 4 -- env PYTHONPATH=build/python /usr/bin/python3 \\
        examples/python/all_reduce.py

(``PYTHONPATH`` names the build tree; ``cmake --install`` puts the package where Debian's
interpreter finds it.)
"""

from . import _core
from ._core import (  # noqa: F401
    ANY_SOURCE,
    ANY_TAG,
    UNDEFINED,
    Bootstrap,
    Communicator,
    Error,
    InProcessStore,
    MemoryRegion,
    RemoteRegion,
    Request,
    Store,
    TcpStore,
    TcpStoreServer,
    TransferEngine,
    version,
)

# One exception class per OrbiTE error code, all derived from orbite.Error (InvalidArgumentError
# is also a ValueError, TimeoutError a TimeoutError, ConnectionLostError a ConnectionError).
_errors = sorted(n for n in dir(_core) if n.endswith("Error") and n != "Error")
globals().update({n: getattr(_core, n) for n in _errors})

__all__ = [
    "ANY_SOURCE",
    "ANY_TAG",
    "UNDEFINED",
    "Bootstrap",
    "Communicator",
    "Error",
    "InProcessStore",
    "MemoryRegion",
    "RemoteRegion",
    "Request",
    "Store",
    "TcpStore",
    "TcpStoreServer",
    "TransferEngine",
    "version",
] + _errors
