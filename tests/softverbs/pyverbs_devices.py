"""ctest softverbs.pyverbs: rdma-core's Python bindings (Debian's python3-pyverbs, run by
Debian's /usr/bin/python3) on softverbs: list the devices, open soft_0 and read its
attributes, port, extended attributes and GID 0, as a pyverbs test would start."""
import sys

try:
    import pyverbs.device as d
except ImportError as e:
    print(f"pyverbs: cannot import pyverbs.device ({e}); "
          "run scripts/install-deps.sh (Debian package python3-pyverbs)")
    sys.exit(1)

names = [dev.name.decode() for dev in d.get_device_list()]
print("devices:", names)
if "soft_0" not in names:
    print("pyverbs: soft_0 is not listed: is softverbs the libibverbs.so.1 here?")
    sys.exit(1)
with d.Context(name="soft_0") as ctx:
    attr = ctx.query_device()
    port = ctx.query_port(1)
    attr_ex = ctx.query_device_ex()
    gid = ctx.query_gid(1, 0)
    print(f"fw {attr.fw_version} ports {attr.phys_port_cnt} max_mw {attr.max_mw} "
          f"port_state {port.state} phys_port_cnt_ex {attr_ex.phys_port_cnt_ex} "
          f"device_cap_flags_ex {attr_ex.device_cap_flags_ex:#x} gid0 {gid}")
print("pyverbs: OK")
