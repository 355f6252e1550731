"""`stormpy check-config FILE`: the config file read as `stormpy serve -c` reads it, then
the zones or the site it names loaded and compiled as serving would, so that a file
that checks out serves."""
from __future__ import annotations

import os
import sys

from stormpy import configfile
from stormpy.errors import StormpyError, ZoneError


def _unreadable(loaded: configfile.Loaded) -> list[str]:
    """The zone files or the site that serving would fail to read, one line each."""
    errors = []
    for path, key, line in loaded.files:
        want_dir = loaded.app == "serve-http"
        if not os.path.exists(path):
            problem = "no such " + ("directory" if want_dir else "file")
        elif os.path.isdir(path) != want_dir:
            problem = "not a directory" if want_dir else "is a directory, not a zone file"
        elif not os.access(path, os.R_OK | (os.X_OK if want_dir else 0)):
            problem = "permission denied"
        else:
            continue
        errors.append(f"{loaded.path}:{line}: {key}: {path}: {problem}")
    return errors


def _unstartable(loaded: configfile.Loaded, cfg) -> list[str]:
    """What serve would refuse before it loads a zone: the user to run as."""
    if cfg.user:
        from stormpy import privileges
        try:
            privileges.lookup(cfg.user)
        except StormpyError:
            return [f"{loaded.path}: user {cfg.user}: no such user on this machine"]
    return []


def _unservable(loaded: configfile.Loaded, cfg) -> list[str]:
    """What serving would refuse in the zones or the site, each loaded and compiled as
    at start: one line each (a zone's with its file:line)."""
    try:
        if loaded.app == "serve-http":
            from stormpy.http.site import compile_site
            compile_site(cfg.site)
            return []
        from stormpy.dns.compiler import compile_zones
        from stormpy.dns.zone import load_zone, with_origins
        zones, errors = [], []
        for path, origin in with_origins(cfg.zones, cfg.origins):
            try:
                zones.append(load_zone(path, origin))
            except ZoneError as e:
                errors.append(str(e))
        if not errors:
            compile_zones(zones)
        return errors
    except StormpyError as e:
        return [str(e)]


def check(args) -> int:
    """`stormpy check-config FILE`: a one-line summary, or one line per error (exit 1)."""
    try:
        loaded = configfile.load(args.file, args.serving_commands)
        cfg = configfile.build(loaded)
    except configfile.ConfigError as e:
        print("\n".join(e.lines), file=sys.stderr)
        return 1
    errors = _unreadable(loaded) or _unstartable(loaded, cfg) or _unservable(loaded, cfg)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    where = f"on {cfg.iface} port {cfg.port}" if cfg.iface else "on " + ", ".join(
        f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in cfg.listen)
    what = (f"{len(cfg.zones)} zone file(s)" if loaded.app == "serve-dns" else f"site {cfg.site}")
    print(f"{loaded.path}: ok: {loaded.app} of {what} {where}, {cfg.backend} backend")
    return 0
