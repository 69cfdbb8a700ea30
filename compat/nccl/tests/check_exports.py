"""Checks libnccl.so.2 as a loader sees it: its SONAME, and that every function nccl.h declares
is exported (so a program or framework built against NCCL resolves all of them).

Usage: check_exports.py LIBRARY NCCL_H
"""
import ctypes
import re
import subprocess
import sys


def soname(library):
    out = subprocess.run(["readelf", "-d", library], check=True, capture_output=True,
                         text=True).stdout
    match = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", out)
    return match.group(1) if match else None


def declared_functions(header):
    text = open(header, encoding="utf-8").read()
    return sorted(set(re.findall(r"NCCL_EXPORT\s+[\w\s\*]+?\b(nccl\w+)\s*\(", text)))


def main():
    library, header = sys.argv[1], sys.argv[2]
    failures = []
    name = soname(library)
    if name != "libnccl.so.2":
        failures.append(f"SONAME is {name!r}, want 'libnccl.so.2'")
    functions = declared_functions(header)
    required = {
        "ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommInitRankConfig",
        "ncclCommInitAll", "ncclCommSplit", "ncclCommFinalize", "ncclCommDestroy",
        "ncclCommAbort", "ncclCommGetAsyncError", "ncclGetErrorString", "ncclGetLastError",
        "ncclCommCount", "ncclCommCuDevice", "ncclCommUserRank", "ncclAllReduce",
        "ncclBroadcast", "ncclBcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter",
        "ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd", "ncclRedOpCreatePreMulSum",
        "ncclRedOpDestroy", "ncclCommRegister", "ncclCommDeregister", "ncclMemAlloc",
        "ncclMemFree",
    }
    missing_decl = required - set(functions)
    if missing_decl:
        failures.append(f"nccl.h does not declare {sorted(missing_decl)}")
    lib = ctypes.CDLL(library)
    for fn in functions:
        if not hasattr(lib, fn):
            failures.append(f"{fn} is declared but not exported")
    for failure in failures:
        print("FAIL:", failure)
    print(f"{len(functions)} functions checked, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
