"""Builds the one extension, stormpy._core, from the Cython hub and the C core."""
import glob

from Cython.Build import cythonize
from setuptools import Extension, setup

native = sorted(glob.glob("native/*.c") + glob.glob("native/proto/*.c") +
                glob.glob("native/fastpath/*.c") + glob.glob("native/io/*.c"))

core = Extension(
    "stormpy._core",
    sources=["stormpy/_core.pyx"] + native,
    include_dirs=["native/include"],
    extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Wno-unused-function"],
)

setup(ext_modules=cythonize([core], language_level=3))
