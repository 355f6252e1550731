# cython: language_level=3, boundscheck=False, wraparound=False
"""The native core seen from Python: response tables, DNS answering, frame workers.

Everything per packet happens in C with the GIL released; Python builds tables and
starts, stops and reloads workers. The module is one extension built from the files
it includes, one per object (uvloop's layout); the C declarations are in
includes/core.pxd.
"""
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int64_t, uintptr_t
from libc.string cimport memcpy, memset
from libc.stdlib cimport free
from libc.errno cimport errno
from posix.unistd cimport getpid
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Malloc, PyMem_Free

from stormpy.includes.core cimport *

import os
import time

from stormpy.errors import BackendError

PATCH_COPY = SP_PATCH_COPY
PATCH_COPY_BITS = SP_PATCH_COPY_BITS
PATCH_INSERT = SP_PATCH_INSERT
PATCH_SHIFT = SP_PATCH_SHIFT
DNS_EXACT = SP_DNS_EXACT
DNS_OTHER = SP_DNS_OTHER
DNS_BELOW = SP_DNS_BELOW
DNS_BELOW_OTHER = SP_DNS_BELOW_OTHER
DNS_ZONE_SLOTS = SP_DNS_ZONE_SLOTS   # answers counted per zone: slot 0 and 63 zones
DNS_USER_WILDCARD = SP_DNS_USER_WILDCARD   # a BELOW_OTHER response: BELOW keys at its name
DNS_USER_SIGNED = SP_DNS_USER_SIGNED       # the next response is its DNSSEC form (DO)
DNS_USER_DNAME = SP_DNS_USER_DNAME         # a DNAME's answer, completed per name asked
DNS_USER_GAPS = SP_DNS_USER_GAPS           # a DNSSEC form chosen by the label asked (NSEC)
DNS_GAP_ENTRY = SP_DNS_GAP_ENTRY
DNS_USER_NSEC3 = SP_DNS_USER_NSEC3         # a DNSSEC form completed by the name's NSEC3 hash
RESPONSE_SLOW_PATH = SP_RESPONSE_SLOW_PATH


def rule_tag(unsigned index):
    """The table tag namespace of rule `index`'s keys."""
    return sp_rule_tag(index)
MAX_WORKERS = SP_MAX_WORKERS - 1   # the last slot belongs to the control plane

# Backends built into this extension (AF_XDP and netmap only when their headers
# were found at build time).
COMPILED_BACKENDS = (("socket", "memory", "packet") + (("xdp",) if sp_have_xdp() else ()) +
                     (("netmap",) if sp_have_netmap() else ()))
XDP_COPY_MODES = {"auto": 0, "copy": 1, "zerocopy": 2}
XDP_POLLS = {"block": 0, "busy": 1, "napi": 2}   # enum sp_xdp_poll
MODES = ("memcpy", "precopy")   # how a frame worker sends replies (see precopy.h)
PRECOPY_FRAMES = SP_PRECOPY_DEFAULT_FRAMES
PRECOPY_MIN_BYTES = SP_PRECOPY_DEFAULT_MIN_LEN


def _check_mode(mode):
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    return mode == "precopy"


cdef _copy_exact(uint8_t *dst, src, size_t n, str what):
    """Copy an n-byte value (a MAC or a packed address) into a C field."""
    if src is None or len(src) != n:
        raise ValueError(f"{what} must be {n} bytes")
    for i in range(n):
        dst[i] = src[i]


include "_proto.pxi"
include "_table.pxi"
include "_zone.pxi"
include "_tap.pxi"
include "_table_ref.pxi"
include "_xdp_program.pxi"
include "_slowpath.pxi"
include "_http.pxi"
include "_impair.pxi"
include "_gen.pxi"
include "_frame_worker.pxi"
