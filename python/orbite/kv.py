"""KV-cache transfers by address over OrbiTE's TransferEngine, in the shapes that users of
Mooncake's and NIXL's Python APIs know.

Both sides register memory; one side hands the other its metadata (bytes: its name, and each
region's base address with its OrbiTE descriptor). The other side then writes or reads by the
peer's virtual addresses, which are translated to (region, offset) by interval lookup; a range
outside every registered region, or across two, is an ``orbite.InvalidArgumentError`` naming the
address. Nothing is sent outside OrbiTE's own descriptors: every access is still checked by the
owner against the region's bounds and rights.

- ``TransferEngine`` (Mooncake-like): ``register_memory(addr, length)``, ``get_metadata()``,
  ``add_peer(metadata)``, ``transfer_sync_write/read``, ``batch_transfer_sync_write/read``,
  ``transfer_submit_write/read`` and ``transfer_check_status`` (``"DONE"``, ``"PROC"``,
  ``"ERR"``). Errors raise, with OrbiTE's message, where Mooncake returns -1.
- ``Agent`` (NIXL-like): ``register_memory(descs)``, ``get_agent_metadata()``,
  ``add_remote_agent(metadata)``, ``get_xfer_descs``, ``initialize_xfer("WRITE"|"READ", ...)``,
  ``transfer``, ``check_xfer_state``, ``release_xfer_handle``, and notifications:
  ``initialize_xfer(..., notif_msg=...)`` (delivered to the peer once the transfer's bytes are in
  place, or were read), ``send_notif``, ``get_new_notifs``, ``update_notifs`` and
  ``check_remote_xfer_done``. A notification carries its sender's agent name; the engine's
  notifications from senders that are not agents are listed under the sender's engine id.
"""

import bisect
import ctypes
import itertools
import struct

from . import _core

DONE, PROC, ERR = "DONE", "PROC", "ERR"

__all__ = ["DONE", "PROC", "ERR", "TransferEngine", "Agent", "encode_metadata",
           "decode_metadata"]

_MAGIC = b"OKVM"
_VERSION = 1
_HEAD = struct.Struct("<4sHH")      # magic, version, name length
_COUNT = struct.Struct("<I")        # regions
_ENTRY = struct.Struct("<QI")       # base address, descriptor length
_MAX_REGIONS = 1 << 20
# A notification on the wire: magic, the sender's name (u16 length first), then the message.
_NOTIF_MAGIC = b"OKVN"
_NOTIF_HEAD = struct.Struct("<4sH")
_MAX_NOTIFICATION = 4096  # the engine's bound (kMaxNotificationBytes)


def _invalid(message):
    return _core.InvalidArgumentError(message)


def encode_metadata(name, regions):
    """bytes for `name` and its regions, a list of (base address, descriptor bytes)."""
    raw = name.encode()
    if len(raw) > 0xFFFF:
        raise _invalid(f"metadata: name of {len(raw)} bytes is longer than 65535")
    out = [_HEAD.pack(_MAGIC, _VERSION, len(raw)), raw, _COUNT.pack(len(regions))]
    for base, descriptor in regions:
        out.append(_ENTRY.pack(base, len(descriptor)))
        out.append(descriptor)
    return b"".join(out)


def decode_metadata(data):
    """(name, [(base address, RemoteRegion)]) from encode_metadata's bytes; a truncated, foreign
    or forged input raises InvalidArgumentError."""
    data = bytes(data)
    if len(data) < _HEAD.size:
        raise _invalid(f"metadata: {len(data)} bytes is too short")
    magic, version, name_len = _HEAD.unpack_from(data, 0)
    if magic != _MAGIC:
        raise _invalid(f"metadata: magic {magic!r} is not {_MAGIC!r} (not OrbiTE KV metadata)")
    if version != _VERSION:
        raise _invalid(f"metadata: version {version} (this is version {_VERSION})")
    at = _HEAD.size
    if at + name_len + _COUNT.size > len(data):
        raise _invalid("metadata: truncated in the name")
    name = data[at:at + name_len].decode(errors="strict")
    at += name_len
    (count,) = _COUNT.unpack_from(data, at)
    at += _COUNT.size
    if count > _MAX_REGIONS:
        raise _invalid(f"metadata: {count} regions (at most {_MAX_REGIONS})")
    regions = []
    for i in range(count):
        if at + _ENTRY.size > len(data):
            raise _invalid(f"metadata: truncated at region {i} of {count}")
        base, length = _ENTRY.unpack_from(data, at)
        at += _ENTRY.size
        if at + length > len(data):
            raise _invalid(f"metadata: region {i}'s descriptor of {length} bytes is truncated")
        remote = _core.RemoteRegion(data[at:at + length])
        at += length
        regions.append((base, remote))
    if at != len(data):
        raise _invalid(f"metadata: {len(data) - at} bytes after the last region")
    return name, regions


class _Intervals:
    """Non-overlapping [base, base + length) intervals, each with an object, found by address."""

    def __init__(self, what):
        self._what = what
        self._bases = []
        self._items = []  # (base, length, obj), sorted by base

    def add(self, base, length, obj):
        i = bisect.bisect_right(self._bases, base)
        if i > 0:
            b, n, _ = self._items[i - 1]
            if base < b + n:
                raise _invalid(f"{self._what}: [{base:#x}, +{length}) overlaps the region at "
                               f"[{b:#x}, +{n})")
        if i < len(self._items) and base + length > self._items[i][0]:
            b, n, _ = self._items[i]
            raise _invalid(f"{self._what}: [{base:#x}, +{length}) overlaps the region at "
                           f"[{b:#x}, +{n})")
        self._bases.insert(i, base)
        self._items.insert(i, (base, length, obj))

    def remove(self, base):
        i = bisect.bisect_left(self._bases, base)
        if i == len(self._bases) or self._bases[i] != base:
            raise _invalid(f"{self._what}: no region starts at {base:#x}")
        del self._bases[i]
        return self._items.pop(i)[2]

    def find(self, address, length):
        """(obj, offset) of the region holding [address, address + length)."""
        i = bisect.bisect_right(self._bases, address) - 1
        if i >= 0:
            base, n, obj = self._items[i]
            if address + length <= base + n:
                return obj, address - base
            if address < base + n:
                raise _invalid(f"{self._what}: [{address:#x}, +{length}) runs past the end of "
                               f"the region [{base:#x}, +{n})")
        raise _invalid(f"{self._what}: address {address:#x} (+{length}) is outside every "
                       f"registered region")

    def items(self):
        return list(self._items)

    def __len__(self):
        return len(self._items)


def _notification(name, message):
    """The wire form of an agent's notification: its name travels with the message."""
    if isinstance(message, str):
        message = message.encode()
    raw = name.encode()
    wire = _NOTIF_HEAD.pack(_NOTIF_MAGIC, len(raw)) + raw + bytes(message)
    if len(wire) > _MAX_NOTIFICATION:
        raise _invalid(f"notification of {len(message)} bytes: with the sender's name it takes "
                       f"{len(wire)}, more than {_MAX_NOTIFICATION}")
    return wire


def _sender_and_message(engine_id, wire):
    """(sender name, message) of a notification; one that is not an agent's is its engine
    id's."""
    if len(wire) >= _NOTIF_HEAD.size:
        magic, n = _NOTIF_HEAD.unpack_from(wire)
        if magic == _NOTIF_MAGIC and _NOTIF_HEAD.size + n <= len(wire):
            name = wire[_NOTIF_HEAD.size:_NOTIF_HEAD.size + n]
            try:
                return name.decode(), wire[_NOTIF_HEAD.size + n:]
            except UnicodeDecodeError:
                pass
    return engine_id, wire


class _Batch:
    """The requests of one submitted transfer (one per pair of regions), and the notification
    that follows them when they are several (`notify` issues it: a single request carries its
    own)."""

    def __init__(self, requests, notify=None):
        self.requests = requests
        self._notify = notify
        self._notified = None  # the notification's request, once every transfer is done

    def state(self):
        running = False
        for r in self.requests:
            if not r.test():
                running = True
                continue
            code, _ = r.status()
            if code != "OK":
                return ERR
        if running:
            return PROC
        if self._notify is not None:
            if self._notified is None:
                self._notified = self._notify()
            if not self._notified.test():
                return PROC
            if self._notified.status()[0] != "OK":
                return ERR
        return DONE

    def error(self):
        for r in self.requests + ([self._notified] if self._notified is not None else []):
            st = r.status()
            if st is not None and st[0] != "OK":
                return f"{st[0]}: {st[1]}"
        return None

    def wait(self, timeout):
        for r in self.requests:
            r.wait(timeout)
        if self._notify is not None:
            if self._notified is None:
                self._notified = self._notify()
            self._notified.wait(timeout)


class TransferEngine:
    """Mooncake-like transfers by address. ``engine``: an ``orbite.TransferEngine`` (a
    communicator's ``comm.engine``, say); None makes one from ``config``."""

    def __init__(self, engine=None, *, name=None, config=None):
        self.engine = engine if engine is not None else _core.TransferEngine(config)
        self.name = name if name is not None else self.engine.id
        self._local = _Intervals("local memory")
        self._peers = {}
        self._handles = {}
        self._next_handle = itertools.count(1)

    # Registration.

    def register_memory(self, memory, length=None, access="rw"):
        """memory: an address (int, with length), or a buffer, array or tensor. Returns the base
        address. access: what peers may do ('rw', 'r' or 'w')."""
        region = self.engine.register_memory(self._memory_of(memory, length), access)
        self._remember(region)
        return region.address

    def batch_register_memory(self, addresses, lengths, access="rw"):
        """Registers every (address, length) pair, or none."""
        if len(addresses) != len(lengths):
            raise _invalid(f"batch_register_memory: {len(addresses)} addresses, "
                           f"{len(lengths)} lengths")
        return self._remember_all(self.engine.register_memory(
            [(int(a), int(n)) for a, n in zip(addresses, lengths)], access))

    def unregister_memory(self, address, timeout=30.0):
        region, offset = self._local.find(address, 0)
        if offset != 0:
            raise _invalid(f"unregister_memory: {address:#x} is inside the region at "
                           f"{address - offset:#x}, not its start")
        region.unregister(timeout)
        self._local.remove(address)

    def get_metadata(self):
        """bytes the peer passes to add_peer: this engine's name and its regions."""
        return encode_metadata(self.name,
                               [(base, region.descriptor()) for base, _, region in
                                self._local.items()])

    def add_peer(self, metadata):
        """Learns a peer's regions from its metadata (replacing what it sent before); returns
        its name, which the transfer calls take."""
        name, regions = decode_metadata(metadata)
        table = _Intervals(f"peer {name!r}")
        for base, remote in regions:
            table.add(base, remote.length, remote)
        self._peers[name] = table
        return name

    def remove_peer(self, name):
        self._peer(name)
        del self._peers[name]

    # Transfers.

    def transfer_sync_write(self, peer, local_addr, peer_addr, length, timeout=60.0):
        self.batch_transfer_sync_write(peer, [local_addr], [peer_addr], [length], timeout)

    def transfer_sync_read(self, peer, local_addr, peer_addr, length, timeout=60.0):
        self.batch_transfer_sync_read(peer, [local_addr], [peer_addr], [length], timeout)

    def batch_transfer_sync_write(self, peer, local_addrs, peer_addrs, lengths, timeout=60.0):
        self._batch("write", peer, local_addrs, peer_addrs, lengths).wait(timeout)

    def batch_transfer_sync_read(self, peer, local_addrs, peer_addrs, lengths, timeout=60.0):
        self._batch("read", peer, local_addrs, peer_addrs, lengths).wait(timeout)

    def transfer_submit_write(self, peer, local_addrs, peer_addrs, lengths):
        """Starts the writes; returns a handle for transfer_check_status."""
        return self._submit(self._batch("write", peer, local_addrs, peer_addrs, lengths))

    def transfer_submit_read(self, peer, local_addrs, peer_addrs, lengths):
        return self._submit(self._batch("read", peer, local_addrs, peer_addrs, lengths))

    def transfer_check_status(self, handle):
        """"DONE", "PROC" (still moving) or "ERR" (transfer_error says why)."""
        return self._handle(handle).state()

    def transfer_error(self, handle):
        """'Code: message' of the first failed part, or None."""
        return self._handle(handle).error()

    def transfer_wait(self, handle, timeout=60.0):
        """Waits for the whole transfer; raises its first error."""
        self._handle(handle).wait(timeout)

    def release_transfer(self, handle):
        """Forgets the handle (a transfer still running keeps its memory until it ends)."""
        self._handle(handle)
        del self._handles[handle]

    # Internals.

    @staticmethod
    def _memory_of(memory, length):
        if isinstance(memory, int):
            if length is None:
                raise _invalid("register_memory: an address needs a length")
            return (memory, int(length))
        if length is not None:
            raise _invalid("register_memory: length goes with an address, not a buffer")
        return memory

    def _remember(self, region):
        self._remember_all([region])

    def _remember_all(self, regions):
        """Knows every region, or none: on an overlap none stays registered. Returns their
        addresses."""
        known = []
        try:
            for region in regions:
                self._local.add(region.address, region.length, region)
                known.append(region)
        except Exception:
            for region in known:
                self._local.remove(region.address)
            for region in regions:
                region.unregister()
            raise
        return [region.address for region in regions]

    def _peer(self, name):
        try:
            return self._peers[name]
        except KeyError:
            raise _core.NotFoundError(f"peer {name!r} is unknown (add_peer its metadata first)")

    def _handle(self, handle):
        try:
            return self._handles[handle]
        except KeyError:
            raise _core.NotFoundError(f"transfer handle {handle!r} is unknown or released")

    def _submit(self, batch):
        handle = next(self._next_handle)
        self._handles[handle] = batch
        return handle

    def _notify(self, peer, message):
        """Sends `message` (the wire form) to the engine of agent `peer`: addressed through any
        of its regions."""
        table = self._peer(peer)
        for _, _, remote in table.items():
            return self.engine.notify(remote, message)
        raise _core.NotFoundError(f"peer {peer!r} published no region: a notification is "
                                  f"addressed through one")

    def _notifications(self):
        """{sender: [message, ...]} of what the engine holds now, taken."""
        out = {}
        for engine_id, wire in self.engine.notifications():
            sender, message = _sender_and_message(engine_id, wire)
            out.setdefault(sender, []).append(message)
        return out

    def _batch(self, op, peer, local_addrs, peer_addrs, lengths, notif=None):
        table = self._peer(peer)
        if not len(local_addrs) == len(peer_addrs) == len(lengths):
            raise _invalid(f"{op}: {len(local_addrs)} local addresses, {len(peer_addrs)} peer "
                           f"addresses, {len(lengths)} lengths")
        # Every range is translated (and so checked) before any moves; ranges between one pair
        # of regions go as one batched request.
        groups = {}
        for local_addr, peer_addr, length in zip(local_addrs, peer_addrs, lengths):
            local_addr, peer_addr, length = int(local_addr), int(peer_addr), int(length)
            region, local_off = self._local.find(local_addr, length)
            remote, remote_off = table.find(peer_addr, length)
            key = (id(region), id(remote))
            if key not in groups:
                groups[key] = (region, remote, [])
            groups[key][2].append((local_off, remote_off, length))
        issue = self.engine.put_batch if op == "write" else self.engine.get_batch
        if notif is not None and len(groups) == 1:
            # One request: it carries the notification itself (no extra round trip to wait).
            (region, remote, ranges), = groups.values()
            return _Batch([issue(region, remote, ranges, notification=notif)])
        notify = None
        if notif is not None:
            def notify():
                return self._notify(peer, notif)
        return _Batch([issue(region, remote, ranges) for region, remote, ranges in
                       groups.values()], notify)


def _address_length(obj):
    """(address, length) of a tensor, array or writable buffer."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "element_size"):  # a torch tensor
        if obj.device.type not in ("cpu", "cuda"):
            raise _core.UnavailableError(f"{obj.device} memory is not supported (CPU or CUDA)")
        return obj.data_ptr(), obj.numel() * obj.element_size()
    cuda = getattr(obj, "__cuda_array_interface__", None)
    if cuda is not None:  # device memory (orbite.cuda.DeviceBuffer, cupy, numba)
        n = 1
        for extent in cuda["shape"]:
            n *= extent
        return cuda["data"][0], n * int(cuda["typestr"][2:])
    interface = getattr(obj, "__array_interface__", None)
    if interface is not None:
        return interface["data"][0], obj.nbytes
    view = memoryview(obj)
    if view.readonly:
        raise _invalid("a read-only buffer cannot be a transfer descriptor")
    n = view.nbytes
    return ctypes.addressof((ctypes.c_char * n).from_buffer(obj)), n


class _Xfer:
    def __init__(self, op, remote, local_addrs, peer_addrs, lengths, notif=None):
        self.notif = notif
        self.op, self.remote = op, remote
        self.local_addrs, self.peer_addrs, self.lengths = local_addrs, peer_addrs, lengths
        self.batch = None


class Agent:
    """NIXL-like agent: descriptors are (address, length, device) triples, (N, 3) arrays,
    tensors or arrays, of host ("DRAM") or device ("VRAM") memory; device memory of two
    processes on one host moves over CUDA IPC."""

    def __init__(self, name, engine=None, config=None):
        self.name = name
        self._kv = TransferEngine(engine, name=name, config=config)
        self._notifs = {}  # update_notifs: kept until check_remote_xfer_done consumes them

    @property
    def engine(self):
        return self._kv.engine

    def register_memory(self, descs, mem_type="DRAM", access="rw"):
        """Registers every descriptor (or none); returns their (address, length) list, which
        deregister_memory takes. Tensors and arrays stay alive while registered."""
        self._check_type(mem_type)
        regions = self.engine.register_memory(self._memories(descs), access)
        self._kv._remember_all(regions)
        return [(region.address, region.length) for region in regions]

    def deregister_memory(self, registered, timeout=30.0):
        for address, _ in registered:
            self._kv.unregister_memory(address, timeout)

    def get_agent_metadata(self):
        return self._kv.get_metadata()

    def add_remote_agent(self, metadata):
        return self._kv.add_peer(metadata)

    def remove_remote_agent(self, name):
        self._kv.remove_peer(name)

    def get_xfer_descs(self, descs, mem_type="DRAM"):
        """(address, length) pairs of descriptors, for initialize_xfer."""
        self._check_type(mem_type)
        out = []
        for m in self._memories(descs):
            out.append(m if isinstance(m, tuple) else _address_length(m))
        return out

    def initialize_xfer(self, operation, local_descs, remote_descs, remote_agent, notif_msg=b""):
        """A transfer of local_descs[i] to (WRITE) or from (READ) remote_descs[i]; started by
        transfer(). Every range is checked here."""
        if operation not in ("WRITE", "READ"):
            raise _invalid(f"initialize_xfer: operation {operation!r} is neither 'WRITE' nor "
                           f"'READ'")
        notif = _notification(self.name, notif_msg) if notif_msg else None
        local = self.get_xfer_descs(local_descs)
        remote = self.get_xfer_descs(remote_descs)
        if len(local) != len(remote):
            raise _invalid(f"initialize_xfer: {len(local)} local descriptors, {len(remote)} "
                           f"remote")
        for i, ((_, n), (_, m)) in enumerate(zip(local, remote)):
            if n != m:
                raise _invalid(f"initialize_xfer: descriptor {i} is {n} bytes here and {m} "
                               f"bytes at the peer")
        table = self._kv._peer(remote_agent)
        for (la, n), (ra, _) in zip(local, remote):
            self._kv._local.find(la, n)
            table.find(ra, n)
        return _Xfer("write" if operation == "WRITE" else "read", remote_agent,
                     [a for a, _ in local], [a for a, _ in remote], [n for _, n in local], notif)

    def transfer(self, handle):
        """Starts (or restarts, once finished) the transfer; returns its state."""
        if handle.batch is not None and handle.batch.state() == PROC:
            raise _invalid("transfer: the handle's previous transfer is still running")
        handle.batch = self._kv._batch(handle.op, handle.remote, handle.local_addrs,
                                       handle.peer_addrs, handle.lengths, handle.notif)
        return handle.batch.state()

    def check_xfer_state(self, handle):
        if handle.batch is None:
            raise _invalid("check_xfer_state: the transfer was not started (call transfer)")
        return handle.batch.state()

    def release_xfer_handle(self, handle):
        handle.batch = None

    # Notifications.

    def send_notif(self, remote_agent, msg, timeout=60.0):
        """Sends msg (bytes or str) to the agent; returns once its engine holds it."""
        self._kv._notify(remote_agent, _notification(self.name, msg)).wait(timeout)

    def get_new_notifs(self):
        """{agent name: [message bytes, ...]} that arrived since the last call, taken from the
        engine (every notification of the engine, whoever sent it)."""
        return self._kv._notifications()

    def update_notifs(self):
        """Adds the new notifications to those kept (check_remote_xfer_done consumes them) and
        returns what is kept."""
        for sender, messages in self._kv._notifications().items():
            self._notifs.setdefault(sender, []).extend(messages)
        return self._notifs

    def check_remote_xfer_done(self, remote_agent, lookup_msg):
        """Whether a notification from remote_agent containing lookup_msg arrived (it is then
        consumed): how a target learns that a peer's transfer with that notif_msg finished."""
        if isinstance(lookup_msg, str):
            lookup_msg = lookup_msg.encode()
        kept = self.update_notifs().get(remote_agent, [])
        for i, message in enumerate(kept):
            if lookup_msg in message:
                del kept[i]
                return True
        return False

    @staticmethod
    def _check_type(mem_type):
        # The memory's own kind decides how it moves (a VRAM descriptor's address is device
        # memory); the type names what the caller expects.
        if mem_type not in ("DRAM", "VRAM"):
            raise _core.UnavailableError(f"memory type {mem_type!r}: 'DRAM' and 'VRAM' are "
                                         f"supported")

    @staticmethod
    def _memories(descs):
        """Each descriptor as an (address, length) pair or a buffer object."""
        if isinstance(descs, tuple) and len(descs) == 3 and all(isinstance(x, int)
                                                                for x in descs):
            descs = [descs]
        shape = getattr(descs, "shape", None)
        if shape is not None and len(shape) == 2 and shape[1] == 3:  # an (N, 3) array
            return [(int(a), int(n)) for a, n, _ in descs.tolist()]
        if not isinstance(descs, (list, tuple)):
            descs = [descs]
        out = []
        for d in descs:
            if isinstance(d, tuple):
                if len(d) not in (2, 3) or not all(isinstance(x, int) for x in d):
                    raise _invalid(f"descriptor {d!r} is not (address, length, device)")
                out.append((d[0], d[1]))
            else:
                out.append(d)
        return out
