"""dnspython's master file reader, held to what Knot DNS reads: $INCLUDE relative to
the including file, one CNAME, DNAME or SOA at a name, names in ASCII only. zone.py
loads files with it and words its errors."""
from __future__ import annotations

import encodings.punycode
import os
import unicodedata

import dns.exception
import dns.name
import dns.rdataclass
import dns.rdatatype
import dns.tokenizer
import dns.zone
import dns.zonefile


def _a_label(label: str) -> str | None:
    """label as an A-label where IDNA 2008 surely encodes it as plain Punycode does:
    lowercase letters, digits and hyphens that NFKC leaves as they are."""
    if label.isascii():
        return label
    if (unicodedata.normalize("NFKC", label) == label and label.lower() == label
            and all(c.isalnum() or c == "-" for c in label)):
        return "xn--" + encodings.punycode.punycode_encode(label).decode("ascii")
    return None


def not_ascii(text: str | None) -> str:
    """Why a name written in UTF-8 is refused: Knot DNS refuses it, and dnspython makes
    IDNA 2003's A-labels of it (straße: strasse), not the IDNA 2008 ones clients ask
    for (xn--strae-oqa)."""
    labels = [_a_label(label) for label in text.split(".")] if text else [None]
    if None in labels:
        advice = ("write each label that has them as its A-label (xn--...), as IDNA 2008 "
                  "encodes it (idn2 prints it)")
    else:
        advice = f"write it with A-labels, as IDNA 2008 encodes them: {'.'.join(labels)}"
    return f"{text + ': ' if text else ''}a name with characters other than ASCII; {advice}"


class _AsciiNames(dns.name.IDNACodec):
    """The codec dnspython asks for the labels of a name that is not ASCII, where it
    reads one without the tokenizer ($GENERATE, an $INCLUDE's origin)."""

    def encode(self, label: str) -> bytes:
        raise dns.exception.SyntaxError(not_ascii(None))


class _Tokenizer(dns.tokenizer.Tokenizer):
    """dnspython's tokenizer, but the file named after $INCLUDE is joined to `base`,
    this file's directory relative to the working directory (the top file's): dnspython
    opens it from the working directory, Knot DNS from the including file's."""

    def __init__(self, f, filename: str, base: str = ""):
        super().__init__(f, filename, idna_codec=_AsciiNames())
        self.base, self._after_include = base, False

    def as_name(self, token, origin=None, relativize=False, relativize_to=None):
        if token.is_identifier() and not token.value.isascii():
            raise dns.exception.SyntaxError(not_ascii(token.value))
        return super().as_name(token, origin, relativize, relativize_to)

    def get(self, want_leading=False, want_comment=False):
        token = super().get(want_leading, want_comment)
        if self._after_include and (token.is_identifier() or token.is_quoted_string()):
            token = dns.tokenizer.Token(token.ttype, os.path.join(self.base, token.value))
        # only the reader's loop asks for both, at the start of each line
        self._after_include = (want_leading and want_comment and token.is_identifier()
                               and token.value.upper() == "$INCLUDE")
        return token


class _Reader(dns.zonefile.Reader):
    """The reader, each file it includes read with _Tokenizer."""

    @property
    def tok(self):
        return self._tok

    @tok.setter
    def tok(self, tok):
        if not isinstance(tok, _Tokenizer):      # an included file, as dnspython opened it
            tok = _Tokenizer(tok.file, tok.filename, os.path.dirname(tok.filename))
        self._tok = tok


class SecondRecord(dns.exception.DNSException):
    """A second record, other than the first, of a type a name has one of."""

    def __init__(self, name: dns.name.Name, first, second):
        super().__init__()
        self.name, self.first, self.second = name, first, second

    def problem(self, _owner) -> str:
        kind = dns.rdatatype.to_text(self.first.rdtype)
        if kind == "SOA":
            return (f"a second SOA record at {self.name}, serial {self.second.serial} (the "
                    f"first has serial {self.first.serial}); a zone has one SOA record")
        rfc = "RFC 2181 section 10.1" if kind == "CNAME" else "RFC 6672"
        return (f"{self.name} has two {kind} records, {self.first} and {self.second}; a "
                f"name has one {kind} at most ({rfc})")


def _one_of_a_kind(txn, name, rdataset) -> None:
    """dnspython keeps the last of two CNAMEs, DNAMEs or SOAs at a name; Knot DNS refuses
    the first two ("multiple CNAME records") and keeps the first SOA. Either way the
    file says two things: it is refused. The same record twice is one record."""
    if rdataset.rdtype in (dns.rdatatype.CNAME, dns.rdatatype.DNAME, dns.rdatatype.SOA):
        held = txn.get(name, rdataset.rdtype)
        if held and rdataset[0] not in held:
            raise SecondRecord(name, held[0], rdataset[0])


def parse(f, filename: str, origin: dns.name.Name | None, check: bool,
          base: str = "") -> dns.zone.Zone:
    """dns.zone.from_file, read with _Reader; the working directory is the top file's,
    base the directory of the file f is, relative to it."""
    zone = dns.zone.Zone(origin, dns.rdataclass.IN, relativize=False)
    with zone.writer(True) as txn:
        txn.check_put_rdataset(_one_of_a_kind)
        reader = _Reader(_Tokenizer(f, filename, base), dns.rdataclass.IN, txn,
                         allow_include=True)
        try:
            reader.read()
        except dns.zonefile.UnknownOrigin:
            raise dns.zone.UnknownOrigin from None
    if check:
        zone.check_origin()
    return zone
