"""Zones signed the way an operator signs them, with ldns-signzone (Debian's ldnsutils):
the signed compile benchmark and the signed-zone tests take their DNSSEC data from here."""
from __future__ import annotations

import os
import shutil
import subprocess

# NSEC3 with opt-out, a salt and two extra iterations: every part of the hash used
NSEC3_FLAGS = ["-n", "-p", "-s", "abcd", "-t", "2"]


def available() -> bool:
    return bool(shutil.which("ldns-signzone") and shutil.which("ldns-keygen"))


def sign_zone(source: str, origin: str, directory: str, nsec3: bool, name: str | None = None) -> str:
    """source signed with a new KSK and ZSK (ECDSA P-256) made in directory; the path
    of the signed file there."""
    keys = []
    for ksk in (["-k"], []):
        out = subprocess.run(["ldns-keygen", "-a", "ECDSAP256SHA256", *ksk, origin.rstrip(".")],
                             cwd=directory, capture_output=True, text=True, check=True)
        keys.append(os.path.join(directory, out.stdout.strip()))
    path = os.path.join(directory, name or ("nsec3.zone" if nsec3 else "nsec.zone"))
    subprocess.run(["ldns-signzone", *(NSEC3_FLAGS if nsec3 else []), "-o", origin.rstrip("."),
                    "-f", path, source, *keys], cwd=directory, capture_output=True, text=True,
                   check=True)
    return path
