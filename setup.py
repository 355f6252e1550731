"""Builds the one extension, stormpy._core, from the Cython hub and the C core.

Optional backends are compiled in when what they need is present at build time:
AF_XDP when pkg-config finds libxdp and libbpf and clang can build the XDP program
(STORMPY_NO_XDP=1 leaves it out); netmap when NETMAP_INCLUDE names a directory
holding net/netmap_user.h; the C zone reader when pkg-config finds ldns.
"""
import glob
import os
import shutil
import subprocess
import sysconfig

from Cython.Build import cythonize
from setuptools import Extension, setup

NOT_CORE = ("native/tests/", "native/fuzz/", "native/bpf/")   # built by their own Makefiles
XDP = ["native/io/xdp_program.c", "native/io/xdp_socket.c", "native/io/xdp_answer.c"]
ZONE_READERS = (["native/zone/read.c", "native/zone/read_check.c",    # with ldns
                 "native/zone/axfr.c"],
                ["native/zone/read_none.c"])                            # without
OPTIONAL = {"native/io/netmap.c", *XDP, *ZONE_READERS[0], *ZONE_READERS[1]}
native = sorted(f for f in glob.glob("native/**/*.c", recursive=True)
                if not f.startswith(NOT_CORE) and f not in OPTIONAL)
macros, cflags, libraries = [], [], []

netmap = os.environ.get("NETMAP_INCLUDE")
if netmap:
    if not os.path.exists(os.path.join(netmap, "net", "netmap_user.h")):
        raise SystemExit(f"NETMAP_INCLUDE={netmap}: no net/netmap_user.h there")
    native.append("native/io/netmap.c")
    macros.append(("SP_HAVE_NETMAP", "1"))
    cflags += ["-isystem", netmap]   # netmap's own header is not ours to warn about

def build_bpf_programs():
    """Compile native/bpf/*.bpf.c; each object's absolute path is embedded (.incbin) in
    the C file that loads it (steer: xdp_program.c, guard: tcp_guard.c)."""
    if os.environ.get("STORMPY_NO_XDP") or not shutil.which("clang") or not shutil.which("pkg-config"):
        return None
    if subprocess.run(["pkg-config", "--exists", "libxdp", "libbpf"]).returncode != 0:
        return None
    arch = subprocess.run(["cc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
    cmd = ["clang", "-O2", "-g", "-Wall", "-Werror", "-target", "bpf"]
    cmd += [f"-I/usr/include/{arch}"] if arch else []
    cmd += ["-Inative/include"]     # the layouts the programs share with their loaders
    objs = {}
    for name in ("steer", "guard"):
        obj = os.path.abspath(os.path.join("build", "bpf", f"{name}.bpf.o"))
        os.makedirs(os.path.dirname(obj), exist_ok=True)
        subprocess.check_call(cmd + ["-c", f"native/bpf/{name}.bpf.c", "-o", obj])
        objs[name] = obj
    return objs


bpf_objs = build_bpf_programs()
if bpf_objs:
    native += XDP
    macros += [("SP_WITH_XDP", "1"), ("SP_XDP_BPF_OBJ", f'"{bpf_objs["steer"]}"'),
               ("SP_TCP_GUARD_OBJ", f'"{bpf_objs["guard"]}"')]
    libraries += ["xdp", "bpf"]

def have_ldns() -> bool:
    """The C zone reader needs NLnetLabs' ldns (Debian: libldns-dev); without it every
    zone is read by dnspython (STORMPY_NO_LDNS=1 leaves it out)."""
    if os.environ.get("STORMPY_NO_LDNS") or not shutil.which("pkg-config"):
        return False
    return subprocess.run(["pkg-config", "--exists", "ldns"]).returncode == 0


if have_ldns():
    native += ZONE_READERS[0]
    libraries.append("ldns")
else:
    native += ZONE_READERS[1]
    print("stormpy: ldns not found (libldns-dev), so zone files are read by dnspython")

def first_accepted(*choices: list) -> list:
    """The first list of flags the C compiler and its assembler take, else none."""
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    for flags in choices:
        probe = subprocess.run(cc + flags + ["-x", "c", "-c", "-o", os.devnull, "-"],
                               input=b"int f(int x) { return x ? 2 * x : 1; }\n",
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if probe.returncode == 0:
            return flags
    return []


# Skylake-family Intel cores (most x86 servers of 2017-2021) no longer cache the decoded
# form of a branch that crosses or ends on a 32-byte boundary (the JCC erratum's
# microcode): the assembler moves branches off those boundaries, -4 to -13% time a frame
# (docs/PERFORMANCE.md section 2, the twenty-second session). GCC's form, then clang's;
# other targets take neither.
branch_alignment = first_accepted(["-Wa,-mbranches-within-32B-boundaries"],
                                  ["-mbranches-within-32B-boundaries"])

core = Extension(
    "stormpy._core",
    sources=["stormpy/_core.pyx"] + native,
    include_dirs=["native/include"],
    define_macros=macros,
    libraries=libraries,
    # hidden: the C core calls itself directly, never through the PLT (only the module
    # init, which Python marks, is exported); -flto: and across its files, where the
    # compiler finds that inlining pays (the frame path's small calls); renamed registers:
    # the flattened frame functions spill less (docs/PERFORMANCE.md section 2, 2026-11-28)
    extra_compile_args=["-std=gnu11", "-O2", "-flto", "-frename-registers",
                        "-fvisibility=hidden", "-Wall", "-Wno-unused-function"] + cflags +
                       branch_alignment,
    # -flto: code is generated here, so the assembler's flags are given here too
    extra_link_args=["-O2", "-flto=auto", "-frename-registers"] + branch_alignment,
)

setup(ext_modules=cythonize([core], language_level=3))
