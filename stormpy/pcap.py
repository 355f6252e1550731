"""pcap files in and out of the memory backend: the frames of a capture to replay through
the real fast path, and the replies written as a capture (for labs, tests and benchmarks).

scapy reads and writes the files (pcap and pcapng); the frames themselves go to C
untouched."""
from __future__ import annotations

import logging

from stormpy.errors import StormpyError

LINKTYPE_ETHERNET = 1


def read_frames(path: str, limit: int = 10_000_000) -> list[bytes]:
    """The Ethernet frames of a capture file, in order."""
    from scapy.error import Scapy_Exception
    from scapy.utils import PcapReader

    frames = []
    # scapy warns on stderr about link types it does not know; the one line below says it
    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
    try:
        with PcapReader(path) as reader:
            linktype = getattr(reader, "linktype", LINKTYPE_ETHERNET)
            if linktype != LINKTYPE_ETHERNET:
                raise StormpyError(f"{path}: link type {linktype}, not Ethernet: the fast path "
                                   f"reads Ethernet frames")
            for pkt in reader:
                if len(frames) >= limit:
                    raise StormpyError(f"{path}: more than {limit} frames")
                frames.append(bytes(pkt))
    except FileNotFoundError:
        raise StormpyError(f"{path}: no such file") from None
    except PermissionError:
        raise StormpyError(f"{path}: permission denied") from None
    except IsADirectoryError:
        raise StormpyError(f"{path}: is a directory") from None
    except (Scapy_Exception, EOFError, ValueError) as e:
        raise StormpyError(f"{path}: not a pcap or pcapng file ({e})") from None
    return frames


def write_frames(path: str, frames: list[bytes]) -> None:
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    try:
        wrpcap(path, [Ether(f) for f in frames], linktype=LINKTYPE_ETHERNET)
    except OSError as e:
        raise StormpyError(f"{path}: {e.strerror or e}") from None

