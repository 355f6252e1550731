"""argparse types shared by every stormpy command: each parses one kind of value and
fails with a message argparse prints as one line."""
from __future__ import annotations

import argparse
import os


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value


def seconds(text: str) -> float:
    """A timeout: a positive number of seconds, at most a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0.001 <= value <= 86400:
        raise argparse.ArgumentTypeError(f"{text} must be between 0.001 and 86400 seconds")
    return value


def _number_in(text: str, low: float, high: float, unit: str, suffix: str) -> float:
    try:
        value = float(text.strip().removesuffix(suffix))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of {unit}") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{text} is not between {low:g} and {high:g} {unit}")
    return value


def percent(text: str) -> float:
    """A share from 0 to 100, with or without a % sign."""
    return _number_in(text, 0, 100, "percent", "%")


def milliseconds(text: str) -> float:
    """A delay from 0 to a minute, with or without "ms"."""
    return _number_in(text, 0, 60_000, "milliseconds", "ms")


def max_udp(text: str) -> int:
    value = positive(text)
    if not 512 <= value <= 4096:
        raise argparse.ArgumentTypeError("must be between 512 and 4096")
    return value


def port(text: str) -> int:
    value = positive(text)
    if value > 65535:
        raise argparse.ArgumentTypeError("a port is at most 65535")
    return value


def non_negative(text: str) -> int:
    return 0 if text.strip() == "0" else positive(text)


def prefix_bits(bits: int):
    def parse(text: str) -> int:
        value = non_negative(text)
        if value > bits:
            raise argparse.ArgumentTypeError(f"a prefix is at most {bits} bits")
        return value
    return parse


def cpu_list(text: str) -> list[int]:
    cpus = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cpus += range(int(lo), int(hi or lo) + 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected CPU numbers like 0,2 or 0-3") from None
    missing = _cpus_refused(set(cpus))
    if missing:     # else each worker pinned there fails with a bare EINVAL
        raise argparse.ArgumentTypeError(
            f"{text!r}: CPU {missing[0]} is not one this server may run on here "
            f"(online: {_read_text('/sys/devices/system/cpu/online') or 'unknown'})")
    return cpus


def _cpus_refused(cpus: set[int]) -> list[int]:
    """The CPUs a worker could not be pinned to, tried as a worker will be: the current
    mask may be narrower than what pinning allows (a parent under taskset), so it is
    no guide. The mask is put back."""
    mask, refused = os.sched_getaffinity(0), []
    try:
        for cpu in sorted(cpus):
            try:
                os.sched_setaffinity(0, {cpu})
            except (OSError, ValueError, OverflowError):
                refused.append(cpu)
    finally:
        os.sched_setaffinity(0, mask)
    return refused


def _read_text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def flush_us(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError("must be between 0 and 1000000 microseconds")
    return value


def txt_string(text: str) -> str:
    if len(text.encode()) > 255:
        raise argparse.ArgumentTypeError("at most 255 bytes (one TXT string)")
    return text


def nsid(text: str) -> bytes:
    """A server's NSID (RFC 5001) as Knot and NSD take it: 0x and hex digits, or text,
    sent as its UTF-8 bytes; at most 128 bytes. Empty: none."""
    if text[:2].lower() == "0x":
        try:
            value = bytes.fromhex(text[2:])
        except ValueError:
            raise argparse.ArgumentTypeError("after 0x, pairs of hex digits") from None
    else:
        value = text.encode()
    if len(value) > 128:
        raise argparse.ArgumentTypeError(f"at most 128 bytes, not {len(value)}")
    return value


nsid.reads_text = True    # a config file's 0x12 is this text, not YAML's number


def number_list(text: str) -> list[int]:
    """'1,2,4' or '1-4' or '1k,100k,1M' -> a list of ints (for argparse)."""
    out = []
    try:
        for part in text.split(","):
            part = part.strip().lower()
            lo, _, hi = part.partition("-") if "-" in part[1:] else (part, "", "")
            vals = [_scaled(lo)] if not hi else list(range(_scaled(lo), _scaled(hi) + 1))
            out += vals
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected numbers like 1,32,64 or 1k,1M") from None
    if not out or any(v < 1 for v in out):
        raise argparse.ArgumentTypeError(f"{text!r}: every value must be at least 1")
    return out


def _scaled(text: str) -> int:
    mult = {"k": 1000, "m": 1000_000}.get(text[-1:], 1)
    return int(text[:-1] if mult > 1 else text) * mult


def tx_limit(text: str) -> int:
    """--tx-limit: bytes, 0 (no limit) or at least one frame's worth, below 1 GiB."""
    n = non_negative(text)
    if n and not 64 <= n < 1 << 30:
        raise argparse.ArgumentTypeError(f"{text!r}: 0, or from 64 bytes to below 1 GiB")
    return n


def tap_buffer(text: str) -> int:
    """--tap-buffer: MiB per ring, 0 or a power of two up to 1024."""
    n = non_negative(text)
    if n and (n & (n - 1) or n > 1024):
        raise argparse.ArgumentTypeError(f"{text!r}: 0, or a power of two of MiB up to 1024")
    return n
