"""OrbiTE for Python: communicators, collectives and requests over OrbiTE's engine.

Run a job with the launcher and Debian's interpreter::

    build/bin/orbite-run -n 4 -- env PYTHONPATH=build/python /usr/bin/python3 \\
        examples/python/all_reduce.py

(``PYTHONPATH`` names the build tree; ``cmake --install`` puts the package where Debian's
interpreter finds it.)
"""

from . import _core
from ._core import UNDEFINED, Bootstrap, Communicator, Error, Request, version  # noqa: F401

# One exception class per OrbiTE error code, all derived from orbite.Error (InvalidArgumentError
# is also a ValueError, TimeoutError a TimeoutError, ConnectionLostError a ConnectionError).
_errors = sorted(n for n in dir(_core) if n.endswith("Error"))
globals().update({n: getattr(_core, n) for n in _errors})

__all__ = ["UNDEFINED", "Bootstrap", "Communicator", "Error", "Request", "version"] + _errors
