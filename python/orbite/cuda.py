"""Device and pinned host memory that OrbiTE allocates, without torch.

``DeviceBuffer(nbytes, device=0)`` is device memory: the CPU never touches it; it offers
``__cuda_array_interface__`` (uint8), so ``register_memory``, put/get, send/recv and the
collectives take it as device memory, and ``copy_from_host`` / ``copy_to_host`` / ``fill`` move
bytes through the driver. ``PinnedBuffer(nbytes)`` is pinned host memory with the buffer protocol
(``memoryview(buf)``, ``numpy.frombuffer(buf, dtype=numpy.uint8)``). Both need a CUDA driver
(NVIDIA's, or softcuda with ``LD_LIBRARY_PATH=build/softcuda``) and raise ``UnavailableError``
naming what is missing otherwise.

Other device memory works too: objects with ``__cuda_array_interface__`` (cupy, numba), DLPack
tensors on a CUDA device (torch), and ``(address, length)`` pairs whose address is device memory.
"""

from ._core import cuda as _cuda

DeviceBuffer = _cuda.DeviceBuffer
PinnedBuffer = _cuda.PinnedBuffer
device_count = _cuda.device_count

__all__ = ["DeviceBuffer", "PinnedBuffer", "device_count"]
