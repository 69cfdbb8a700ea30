#!/usr/bin/env python3
"""Writes the hwloc XML descriptions of the 8-GPU test servers (see README.md in this folder).

Each server: 2 packages, one NUMA node and 8 cores (1 PU each) per package, and per package two
PCIe Gen5 switches (Broadcom PEX890xx ids), each switch behind its own host bridge and holding two
NVIDIA H100 PCIe GPUs and one ConnectX-6 HCA (PCIe Gen4, with an `ib*` network and an `mlx5_*`
OpenFabrics OS device). A switch is written as hwloc reports a real one: the upstream port bridge
below the host bridge, then one downstream port bridge per device.

Host a pairs the GPUs of each switch with NVLink bridges (an `NVLinkBandwidth` distance matrix over
the GPUs' NVML OS devices, as hwloc's NVML backend reports it); host b is the same board without
NVLink bridges and with another host name.

gpu8_sxm_ib400.xml is the host of the simulated clusters in docs/scale.md: the same board with 8
H100 SXM GPUs (`10de:2330`) all joined by NVLink through NVSwitch (450 GB/s each way per GPU,
written as an all-pairs NVLinkBandwidth matrix) and one 400 Gbit/s ConnectX-7 HCA (`15b3:1021`,
PCIe Gen5) per GPU, two per switch, as DGX H100-class servers wire them.

Usage: python3 make_gpu_servers.py  (writes gpu8_host_a.xml, gpu8_host_b.xml and
gpu8_sxm_ib400.xml beside itself)
"""

import os

PACKAGES = 2
CORES_PER_PACKAGE = 8
SWITCHES_PER_PACKAGE = 2
GPUS_PER_SWITCH = 2
# First PCI bus of each switch's host bridge, as on common 2-socket boards.
SWITCH_BUS = [0x18, 0x38, 0x98, 0xB8]

GEN5_X16_GBPS = "63.015385"  # what hwloc computes for 32 GT/s x16 with 128b/130b coding
GEN4_X16_GBPS = "31.507692"  # 16 GT/s x16
NVLINK_BRIDGE_MBPS = 300000  # H100 PCIe NVLink bridge: 600 GB/s both directions (NVIDIA datasheet)
NVSWITCH_MBPS = 450000  # H100 SXM: 18 NVLink 4 links, 900 GB/s both directions (NVIDIA datasheet)


class Board:
    """What differs between the PCIe servers and the SXM one."""

    def __init__(self, sxm):
        self.nics_per_switch = 2 if sxm else 1
        self.gpu_type = "0302 [10de:2330] [10de:16c1] a1" if sxm else "0302 [10de:2331] [10de:1626] a1"
        self.nic_type = "0207 [15b3:1021] [15b3:0041] 00" if sxm else "0207 [15b3:101b] [15b3:0007] 00"
        self.nic_link = GEN5_X16_GBPS if sxm else GEN4_X16_GBPS
        self.nic_gbps = "400" if sxm else "200"


class Writer:
    def __init__(self):
        self.lines = []
        self.gp = 0
        self.depth = 1

    def next_gp(self):
        self.gp += 1
        return self.gp

    def open(self, attrs, leaf=False):
        text = " ".join(f'{k}="{v}"' for k, v in attrs)
        self.lines.append("  " * self.depth + f"<object {text}" + ("/>" if leaf else ">"))
        if not leaf:
            self.depth += 1

    def close(self):
        self.depth -= 1
        self.lines.append("  " * self.depth + "</object>")

    def info(self, name, value):
        self.lines.append("  " * self.depth + f'<info name="{name}" value="{value}"/>')


def mask(bits):
    """An hwloc bitmap string: 32-bit hex words, most significant first."""
    value = sum(1 << b for b in bits)
    words = []
    while True:
        words.append(value & 0xFFFFFFFF)
        value >>= 32
        if value == 0:
            break
    return ",".join(f"0x{w:08x}" for w in reversed(words))


def sets(cpus, nodes, machine=False):
    out = [("cpuset", mask(cpus)), ("complete_cpuset", mask(cpus))]
    if machine:
        out.append(("allowed_cpuset", mask(cpus)))
    out += [("nodeset", mask(nodes)), ("complete_nodeset", mask(nodes))]
    if machine:
        out.append(("allowed_nodeset", mask(nodes)))
    return out


def write_switch(w, switch, gpu_osdevs, board):
    bus = SWITCH_BUS[switch]
    last = bus + 1 + GPUS_PER_SWITCH + board.nics_per_switch
    w.open([("type", "Bridge"), ("gp_index", w.next_gp()), ("bridge_type", "0-1"), ("depth", "0"),
            ("bridge_pci", f"0000:[{bus:02x}-{last:02x}]")])
    w.open([("type", "Bridge"), ("gp_index", w.next_gp()), ("bridge_type", "1-1"), ("depth", "1"),
            ("bridge_pci", f"0000:[{bus + 1:02x}-{last:02x}]"), ("pci_busid", f"0000:{bus:02x}:00.0"),
            ("pci_type", "0604 [1000:c030] [1000:a064] b0"), ("pci_link_speed", GEN5_X16_GBPS)])
    devices = [("gpu", i) for i in range(GPUS_PER_SWITCH)] + [
        ("nic", i) for i in range(board.nics_per_switch)]
    for port, (kind, nic) in enumerate(devices):
        dev_bus = bus + 2 + port
        w.open([("type", "Bridge"), ("gp_index", w.next_gp()), ("bridge_type", "1-1"), ("depth", "2"),
                ("bridge_pci", f"0000:[{dev_bus:02x}-{dev_bus:02x}]"),
                ("pci_busid", f"0000:{bus + 1:02x}:{port:02x}.0"),
                ("pci_type", "0604 [1000:c030] [1000:a064] b0"), ("pci_link_speed", GEN5_X16_GBPS)])
        if kind == "gpu":
            gpu = len(gpu_osdevs)
            w.open([("type", "PCIDev"), ("gp_index", w.next_gp()), ("pci_busid", f"0000:{dev_bus:02x}:00.0"),
                    ("pci_type", board.gpu_type), ("pci_link_speed", GEN5_X16_GBPS)])
            gp = w.next_gp()
            gpu_osdevs.append(gp)
            w.open([("type", "OSDev"), ("gp_index", gp), ("name", f"nvml{gpu}"), ("subtype", "NVML"),
                    ("osdev_type", "1")], leaf=True)
            w.close()
        else:
            w.open([("type", "PCIDev"), ("gp_index", w.next_gp()), ("pci_busid", f"0000:{dev_bus:02x}:00.0"),
                    ("pci_type", board.nic_type), ("pci_link_speed", board.nic_link)])
            w.open([("type", "OSDev"), ("gp_index", w.next_gp()), ("name", f"ibp{dev_bus}s0"),
                    ("osdev_type", "2")])
            w.info("BraidNetSpeedGbps", board.nic_gbps)
            w.close()
            mlx = switch * board.nics_per_switch + nic
            w.open([("type", "OSDev"), ("gp_index", w.next_gp()), ("name", f"mlx5_{mlx}"),
                    ("osdev_type", "3")], leaf=True)
            w.close()
        w.close()  # downstream port
    w.close()  # upstream port
    w.close()  # host bridge


def server(host_name, nvlink, sxm=False):
    board = Board(sxm)
    w = Writer()
    all_cpus = range(PACKAGES * CORES_PER_PACKAGE)
    w.open([("type", "Machine"), ("os_index", "0")] + sets(all_cpus, range(PACKAGES), machine=True)
           + [("gp_index", w.next_gp())])
    w.info("Backend", "Linux")
    w.info("HostName", host_name)
    gpu_osdevs = []
    for pkg in range(PACKAGES):
        cpus = range(pkg * CORES_PER_PACKAGE, (pkg + 1) * CORES_PER_PACKAGE)
        w.open([("type", "Package"), ("os_index", pkg)] + sets(cpus, [pkg]) + [("gp_index", w.next_gp())])
        w.open([("type", "NUMANode"), ("os_index", pkg)] + sets(cpus, [pkg])
               + [("gp_index", w.next_gp()), ("local_memory", 274877906944)], leaf=True)
        w.open([("type", "L3Cache")] + sets(cpus, [pkg])
               + [("gp_index", w.next_gp()), ("cache_size", 33554432), ("depth", 3),
                  ("cache_linesize", 64), ("cache_associativity", 16), ("cache_type", 0)])
        for cpu in cpus:
            w.open([("type", "Core"), ("os_index", cpu)] + sets([cpu], [pkg]) + [("gp_index", w.next_gp())])
            w.open([("type", "PU"), ("os_index", cpu)] + sets([cpu], [pkg]) + [("gp_index", w.next_gp())],
                   leaf=True)
            w.close()
        w.close()  # L3
        for s in range(SWITCHES_PER_PACKAGE):
            write_switch(w, pkg * SWITCHES_PER_PACKAGE + s, gpu_osdevs, board)
        w.close()  # package
    w.close()  # machine
    if nvlink:
        n = len(gpu_osdevs)
        values = [0] * (n * n)
        for a in range(n):
            for b in range(n):
                if sxm and a != b:
                    values[a * n + b] = NVSWITCH_MBPS
                elif not sxm and b == a ^ 1:
                    values[a * n + b] = NVLINK_BRIDGE_MBPS
        indexes = "".join(f"{gp} " for gp in gpu_osdevs)
        numbers = "".join(f"{v} " for v in values)
        w.lines.append(f'  <distances2 type="OSDev" nbobjs="{n}" kind="9" name="NVLinkBandwidth" indexing="gp">')
        w.lines.append(f'    <indexes length="{len(indexes)}">{indexes}</indexes>')
        w.lines.append(f'    <u64values length="{len(numbers)}">{numbers}</u64values>')
        w.lines.append("  </distances2>")
    head = ['<?xml version="1.0" encoding="UTF-8"?>', '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
            '<topology version="2.0">']
    return "\n".join(head + w.lines + ["</topology>", ""])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for name, host, nvlink, sxm in [("gpu8_host_a.xml", "gpu8-a", True, False),
                                    ("gpu8_host_b.xml", "gpu8-b", False, False),
                                    ("gpu8_sxm_ib400.xml", "gpu8-sxm", True, True)]:
        with open(os.path.join(here, name), "w") as f:
            f.write(server(host, nvlink, sxm))


if __name__ == "__main__":
    main()
