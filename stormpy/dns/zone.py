"""Reading RFC 1035 master files with dnspython ($ORIGIN, $TTL, $INCLUDE, $GENERATE)."""
from __future__ import annotations

import contextlib
import io
import os
import re
import struct
import threading
import traceback
from dataclasses import dataclass

import dns.exception
import dns.name
import dns.rdataclass
import dns.rdatatype
import dns.zone
import dns.zonefile

from stormpy.dns.zone_reader import SecondRecord, not_ascii, parse
from stormpy.errors import ZoneError


@dataclass
class Zone:
    path: str
    origin: dns.name.Name
    zone: dns.zone.Zone

    @property
    def record_count(self) -> int:
        return sum(len(rds) for _, rds in self.zone.iterate_rdatasets())

    @property
    def serial(self) -> int:
        return self.zone.get_rdataset(self.origin, dns.rdatatype.SOA)[0].serial


_cwd_lock = threading.Lock()


@contextlib.contextmanager
def _in_directory_of(path: str):
    """$INCLUDE names are relative to the including zone file (as in Knot DNS);
    dnspython opens them relative to the working directory."""
    absolute = os.path.abspath(path)
    with _cwd_lock:
        old = os.getcwd()
        os.chdir(os.path.dirname(absolute))
        try:
            yield absolute
        finally:
            os.chdir(old)


def _read(path: str, origin: dns.name.Name | None, check: bool = True) -> dns.zone.Zone:
    with _in_directory_of(path) as abspath, open(abspath, encoding="utf-8") as f:
        try:
            return parse(f, path, origin, check)
        except AssertionError:       # dnspython's check of a zone that has no origin
            raise ZoneError(f"{path}: no records: a zone file needs at least the SOA and NS "
                            f"records at its origin") from None


def _include_loop(path: str) -> str | None:
    """The first $INCLUDE that leads back to a file including it, as text for the
    message; dnspython would follow it until it runs out of file descriptors. Each
    name is relative to the directory of the file it is in (as written, not resolved)."""
    def visit(file: str, chain: tuple) -> str | None:
        if not os.path.isfile(file):
            return None                  # a pipe is read once, by the reader
        try:
            with open(file, "rb") as f:
                text = f.read()
        except OSError:
            return None                  # the reader says what is wrong with it
        for m in _INCLUDE.finditer(text):
            name = os.fsdecode(m.group(1))
            included = os.path.join(os.path.dirname(file), name)
            target = os.path.realpath(included)
            if target in chain:
                return f"$INCLUDE {name} in {os.path.basename(file)} includes a file it is in"
            if len(chain) < 16 and (why := visit(included, chain + (target,))):
                return why
        return None

    return visit(os.path.abspath(path), (os.path.realpath(path),))


_INCLUDE = re.compile(rb"^\$INCLUDE[ \t]+([^\s;]+)", re.IGNORECASE | re.MULTILINE)


def _first_non_utf8_line(path: str) -> int:
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                return number
    return 0


def _soa_owner(path: str) -> dns.name.Name | None:
    """The owner of the first SOA in a file without $ORIGIN, when written absolute.
    dnspython then parses the whole file with it as the origin."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                fields = line.split(";", 1)[0].split()
                if line[:1].isspace() or len(fields) < 2:
                    continue
                if "SOA" in (x.upper() for x in fields[1:4]) and fields[0].endswith("."):
                    return dns.name.from_text(fields[0])
    except (OSError, UnicodeDecodeError, dns.exception.DNSException):
        return None
    return None


def load_zone(path: str, origin: str | None = None, native: bool = True) -> Zone:
    """Load one master file. The origin comes from `origin`, else the file's $ORIGIN,
    else its SOA owner. Raises ZoneError with a one-line, file:line message. Read in C
    (dns/native.py) unless native is False or the C reader declines the file; every
    error is worded by the Python loader."""
    if not os.path.exists(path):
        raise ZoneError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ZoneError(f"{path}: is a directory, not a zone file")
    if not os.access(path, os.R_OK):
        raise ZoneError(f"{path}: permission denied")
    if not os.path.isfile(path):
        raise ZoneError(f"{path}: not a regular file")
    if origin is not None and not origin.isascii():
        raise ZoneError(f"--origin {not_ascii(origin)}")
    if native:
        from stormpy.dns import native as c_path
        loaded = c_path.load(path, origin)
        if loaded is not None:
            return loaded
    try:
        name = dns.name.from_text(origin) if origin else None
    except dns.exception.DNSException as e:
        raise ZoneError(f"--origin {origin!r}: {e}") from None
    if (loop := _include_loop(path)) is not None:
        raise ZoneError(f"{path}: {loop}")
    try:
        try:
            z = _read(path, name)
        except dns.zone.UnknownOrigin:
            name = None
            name = _soa_owner(path)
            if name is None:
                raise ZoneError(f"{path}: cannot tell the zone's origin: add $ORIGIN to the "
                                f"file or give --origin") from None
            if native:          # the SOA owner known, the C reader can take the file
                loaded = c_path.load(path, name.to_text())
                if loaded is not None:
                    return loaded
            z = _read(path, name)
    except ZoneError:
        raise
    except dns.zone.NoSOA:
        where = f" {z_origin_text(name)}" if name else ""
        raise ZoneError(f"{path}: no SOA record at the zone origin{where}") from None
    except dns.zone.NoNS:
        raise ZoneError(f"{path}: no NS records at the zone origin") from None
    except dns.exception.SyntaxError as e:
        raise ZoneError(_syntax_message(path, name, e)) from None
    except dns.zonefile.CNAMEAndOtherData as e:
        raise ZoneError(_cname_message(path, e)) from None
    except SecondRecord as e:
        raise ZoneError(_reader_message(path, e, e.problem)) from None
    except UnicodeDecodeError as e:
        line = _first_non_utf8_line(path)
        raise ZoneError(f"{path}:{line}: bytes that are not UTF-8 text ({e.reason})" if line
                        else f"{path}: not a text file ({e.reason})") from None
    except (struct.error, OverflowError) as e:   # a value dnspython parses but cannot store
        raise ZoneError(_reader_message(path, e, lambda owner: f"a value out of range in a "
                                        f"record at {owner or 'a name'} ({e})")) from None
    except ValueError as e:                 # dnspython: "add() has non-origin SOA"
        raise ZoneError(_soa_message(path, e)) from None
    except dns.name.NameTooLong as e:      # an owner name, raised as its field is read
        raise ZoneError(_reader_message(path, e, lambda owner: "a name longer than 255 octets",
                                        newline_read=False)) from None
    except dns.exception.DNSException as e:
        raise ZoneError(f"{path}: {e}") from None
    except OSError as e:
        if e.filename and os.path.abspath(str(e.filename)) != os.path.abspath(path):
            raise ZoneError(f"{path}: $INCLUDE {e.filename}: {e.strerror}") from None
        raise ZoneError(f"{path}: {e.strerror}") from None
    for rdtype in (dns.rdatatype.SOA,):
        if z.get_rdataset(z.origin, rdtype) is None:
            raise ZoneError(f"{path}: no SOA record at the zone origin {z.origin}")
    for name_, rdataset in z.iterate_rdatasets():
        if rdataset.rdclass != dns.rdataclass.IN:
            raise ZoneError(f"{path}: {name_} has class {dns.rdataclass.to_text(rdataset.rdclass)}; "
                            f"only IN zones are served")
    if native:      # read by dnspython ($GENERATE, a LOC...), compiled in C all the same
        from stormpy.dns import native as c_path
        held = c_path.from_records(path, z)
        if held is not None:
            return held
    return Zone(path=path, origin=z.origin, zone=z)


def load_zones(paths: list[str], origins: list[str] | None = None) -> list[Zone]:
    """Load each master file, `origins` giving each one's origin in the same order (or
    none at all). Raises ZoneError, one line."""
    return [load_zone(path, origin) for path, origin in with_origins(paths, origins)]


def with_origins(paths: list[str], origins: list[str] | None) -> list[tuple[str, str | None]]:
    """Each zone file with its --origin (None: from the file)."""
    if origins and len(origins) != len(paths):
        raise ZoneError(f"{len(origins)} --origin for {len(paths)} zone files: give one "
                        f"--origin per zone file, in the same order, or none")
    return list(zip(paths, origins or [None] * len(paths)))


def import_rdata_classes() -> None:
    """dnspython imports each record type's module the first time it reads one; a server
    that is about to lose the right to read its files imports them all now."""
    import dns.rdata
    for rdtype in dns.rdatatype.RdataType:
        try:
            dns.rdata.get_rdata_class(dns.rdataclass.IN, rdtype)
        except Exception:
            pass


def z_origin_text(name: dns.name.Name) -> str:
    return name.to_text()


_WHERE = re.compile(r"^(?P<file>.*?):(?P<line>\d+): (?P<msg>.*)$", re.S)


def _syntax_message(path: str, origin: dns.name.Name | None, e: dns.exception.SyntaxError) -> str:
    """dnspython says "file:line: message" but names the following line when it has
    already read the newline; a parse of the lines before it tells which."""
    m = _WHERE.match(str(e))
    if not m:
        return f"{path}: {e}"
    where, line = m.group("file"), int(m.group("line"))
    if origin is None and (reader := _reader_in(e)) is not None:
        origin = reader.zone_origin       # from $ORIGIN: an included file has none
    if line > 1 and _prefix_fails(path, _source(path, where), line - 1, origin):
        line -= 1
    msg = m.group("msg")
    if msg.startswith("Text input is malformed"):     # dnspython's word for a bad value
        msg = f"a value that does not parse in: {_line_text(_source(path, where), line)}"
    elif (ttl := re.fullmatch(r"unknown rdatatype '(\d[^']*)'", msg)) is not None:
        msg = (f"{ttl.group(1)} is not a TTL (seconds up to 4294967295, or with units as "
               f"in 1h30m), and no record type")   # dnspython read it as the type
    return _at(path, where, line, msg)


def _line_text(source: str, line: int) -> str:
    try:
        with open(source, encoding="utf-8", errors="replace") as f:
            for number, text in enumerate(f, 1):
                if number == line:
                    text = " ".join(text.split(";", 1)[0].split())
                    return text if len(text) <= 100 else text[:97] + "..."
    except OSError:
        pass
    return "this line"


def _reader_message(path: str, e: Exception, problem, newline_read: bool = True) -> str:
    """dnspython's message names neither the owner nor the line; its reader, still on
    the traceback, knows both. It has read the record's newline unless the file ended,
    or (newline_read False) the error came from a field, which is on the line unless
    the newline after it was read. problem(owner) says what is wrong with the record."""
    reader = _reader_in(e)
    if reader is None:
        return f"{path}: {problem(None)}"
    where, line = reader.tok.where()
    if newline_read:
        back = not reader.tok.eof
    else:           # a newline the tokenizer gave back was counted all the same
        back = getattr(reader.tok, "ungotten_char", None) == "\n"
    return _at(path, where, line - 1 if back else line, problem(reader.last_name))


def _reader_in(e: Exception) -> dns.zonefile.Reader | None:
    return next((frame.f_locals["self"] for frame, _ in traceback.walk_tb(e.__traceback__)
                 if isinstance(frame.f_locals.get("self"), dns.zonefile.Reader)), None)


def _cname_message(path: str, e: dns.zonefile.CNAMEAndOtherData) -> str:
    return _reader_message(path, e, lambda owner: f"{owner} has a CNAME and other records; a "
                           f"CNAME must be alone at its name (RFC 1034 section 3.6.2)")


def _soa_message(path: str, e: ValueError) -> str:
    if "SOA" not in str(e):
        return f"{path}: {e}"
    return _reader_message(path, e, lambda owner: f"an SOA record at {owner or 'a name'} other "
                           f"than the zone origin; the SOA belongs at the origin only")


def _source(path: str, where: str) -> str:
    """The file dnspython's reader calls `where`: path, or a file it includes."""
    return path if where == path else os.path.join(os.path.dirname(os.path.abspath(path)), where)


def _at(path: str, where: str, line: int, msg: str) -> str:
    suffix = "" if where == path else f" (included from {path})"
    return f"{_source(path, where)}:{line}: {msg}{suffix}"


def _prefix_fails(path: str, source: str, lines: int, origin: dns.name.Name | None) -> bool:
    try:
        with open(source, encoding="utf-8") as f:
            prefix = "".join(f.readlines()[:lines])
    except (OSError, UnicodeDecodeError):
        return False
    try:
        with _in_directory_of(path):
            parse(io.StringIO(prefix), source, origin, check=False,
                   base=os.path.dirname(os.path.abspath(source)))
    except dns.exception.SyntaxError:
        return True
    except Exception:
        return False
    return False
