"""Builds the one extension, stormpy._core, from the Cython hub and the C core.

Optional backends are compiled in when their headers are present at build time:
netmap when NETMAP_INCLUDE names a directory holding net/netmap_user.h.
"""
import glob
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

OPTIONAL = {"native/io/netmap.c", "native/io/xdp.c"}
native = sorted(f for f in glob.glob("native/*.c") + glob.glob("native/proto/*.c") +
                glob.glob("native/fastpath/*.c") + glob.glob("native/io/*.c") if f not in OPTIONAL)
macros, cflags, libraries = [], [], []

netmap = os.environ.get("NETMAP_INCLUDE")
if netmap:
    if not os.path.exists(os.path.join(netmap, "net", "netmap_user.h")):
        raise SystemExit(f"NETMAP_INCLUDE={netmap}: no net/netmap_user.h there")
    native.append("native/io/netmap.c")
    macros.append(("SP_HAVE_NETMAP", "1"))
    cflags += ["-isystem", netmap]   # netmap's own header is not ours to warn about

core = Extension(
    "stormpy._core",
    sources=["stormpy/_core.pyx"] + native,
    include_dirs=["native/include"],
    define_macros=macros,
    libraries=libraries,
    extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Wno-unused-function"] + cflags,
)

setup(ext_modules=cythonize([core], language_level=3))
