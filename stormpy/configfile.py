"""The configuration file: `stormpy serve -c FILE` and `stormpy check-config FILE`.

A YAML file (read with safe_load semantics) shaped like knot.conf where that fits:

    server: {listen: [127.0.0.1:53], workers: 2, user: stormpy, ...}
    rrl:    {rate: 20, slip: 2, ipv4-prefix: 24, allow: [192.0.2.0/24]}
    log:    {verbose: 1}
    zone:   [{domain: example.com., file: example.zone}, ...]      (serve-dns)
    http:   {site: /srv/www, max-connections: 1024, ...}            (serve-http)

Every key comes from a flag of serve-dns or serve-http, found by walking their argparse
parsers, so a new flag has its key with no change here: `--rrl-X` and `--log-X` are `X` in
`rrl:` and `log:`, `--verbose` is `log: verbose`, a flag only serve-http has is in `http:`,
every other flag is in `server:`. Each value goes through the flag's own argparse type and
choices, so the file and the command line reject the same values with the same words.
Zone files and the site are relative to the file's directory. Flags given to
`stormpy serve -c FILE` override the file's keys (a repeatable flag replaces the list)."""
from __future__ import annotations

import argparse
import copy
import hashlib
import os
import sys
from dataclasses import dataclass, field

import yaml

from stormpy.errors import StormpyError

APPS = ("serve-dns", "serve-http")
PREFIX_SECTIONS = ("rrl", "log")     # --rrl-rate is rate in rrl:
NAMED_SECTIONS = {"verbose": "log"}  # flags without a prefix that belong in a section
RENAMED_KEYS = {"log": "log.target"}  # where knot.conf's name reads better than the flag's
# read apart from the other flags: the zone list ({domain, file}) and http.site
POSITIONAL_KEYS = {"zones": "zone[].file", "origin": "zone[].domain", "site": "http.site"}
NOT_SETTINGS = (argparse._HelpAction, argparse._VersionAction)


class ConfigError(StormpyError):
    """One or more errors in a configuration file, one line each."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


def _flag(action: argparse.Action) -> str:
    longs = [o for o in action.option_strings if o.startswith("--")]
    return (longs or action.option_strings)[0]


def _settings(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, NOT_SETTINGS)]


def key_table(commands: dict[str, argparse.ArgumentParser]) -> dict[str, dict[str, argparse.Action]]:
    """For serve-dns and serve-http, each option's key ("section.name") and its action.
    The positionals and --origin are the zone list and http.site, read apart."""
    http_only = ({_flag(a) for a in _settings(commands["serve-http"]) if a.option_strings} -
                 {_flag(a) for a in _settings(commands["serve-dns"]) if a.option_strings})
    table = {}
    for app in APPS:
        table[app] = {}
        for action in _settings(commands[app]):
            if not action.option_strings or action.dest in POSITIONAL_KEYS:
                continue
            name = _flag(action)[2:]
            section = "http" if _flag(action) in http_only else NAMED_SECTIONS.get(name, "server")
            prefix, _, rest = name.partition("-")
            if prefix in PREFIX_SECTIONS and rest:
                section, name = prefix, rest
            table[app][RENAMED_KEYS.get(_flag(action)[2:], f"{section}.{name}")] = action
    return table


# -- reading the file ---------------------------------------------------------------------

class _Bad(Exception):
    """A value that does not fit its key; the message follows the key in the line."""


def _one(action: argparse.Action, value) -> object:
    """One scalar through the flag's type and choices, as argparse would take it."""
    if value is None:
        raise _Bad("needs a value")
    if isinstance(value, (list, dict)):
        raise _Bad(f"expected one value, not a {'list' if isinstance(value, list) else 'mapping'}")
    text = str(value).lower() if isinstance(value, bool) else str(value)
    try:
        result = action.type(text) if action.type else text
    except argparse.ArgumentTypeError as e:
        raise _Bad(str(e)) from None
    except (TypeError, ValueError):
        raise _Bad(f"invalid value {text!r}") from None
    if action.choices is not None and result not in action.choices:
        raise _Bad(f"{text!r} is not one of {', '.join(map(str, action.choices))}")
    return result


def convert(action: argparse.Action, value) -> object:
    """A file value as the namespace would hold it had the flag been given."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction,
                           argparse._StoreConstAction)):
        if not isinstance(value, bool):
            raise _Bad("expected true or false")
        return action.const if value else action.default
    if isinstance(action, argparse.BooleanOptionalAction):    # --x / --no-x: true or false
        if not isinstance(value, bool):
            raise _Bad("expected true or false")
        return value
    if isinstance(action, argparse._CountAction):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _Bad("expected a whole number from 0")
        return value
    if isinstance(action, argparse._AppendAction) or action.nargs not in (None, "?"):
        return [_one(action, v) for v in (value if isinstance(value, list) else [value])]
    if isinstance(action, argparse._StoreAction):
        return _one(action, value)
    raise _Bad(f"{_flag(action)} has no file form")   # a new kind of flag: teach convert()


def _compose(path: str):
    """The document's node tree (line marks kept) and a loader to construct values."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError([f"{path}: {getattr(e, 'strerror', None) or e}"]) from None
    loader = yaml.SafeLoader(text)
    try:
        return loader.get_single_node(), loader
    except yaml.MarkedYAMLError as e:
        raise ConfigError([_yaml_error(path, e)]) from None
    except yaml.YAMLError as e:
        raise ConfigError([f"{path}: YAML: {e}"]) from None
    finally:
        loader.dispose()


def _yaml_error(path: str, e: yaml.MarkedYAMLError) -> str:
    mark = e.problem_mark or e.context_mark
    return f"{path}:{mark.line + 1}: YAML: {e.problem or e.context}"


def _text(keynode) -> str:
    """A mapping key as written (a key that is itself a list or mapping names nothing)."""
    return keynode.value if isinstance(keynode, yaml.ScalarNode) else f"({keynode.id})"


@dataclass
class Loaded:
    """A file read into a serving command's namespace, and where each key was."""
    path: str
    app: str
    args: argparse.Namespace
    commands: dict[str, argparse.ArgumentParser]
    lines: dict[str, int] = field(default_factory=dict)     # dest -> line of its key
    keys: dict[str, str] = field(default_factory=dict)      # dest -> its key in the file
    files: list[tuple[str, str, int]] = field(default_factory=list)  # (path, key, line)

    def error(self, dest: str, message: str) -> str:
        if dest in self.lines:
            return f"{self.path}:{self.lines[dest]}: {self.keys[dest]}: {message}"
        return f"{self.path}: {message}"


class _Reader:
    def __init__(self, path: str, commands: dict[str, argparse.ArgumentParser]):
        self.path, self.commands = path, commands
        self.table = key_table(commands)
        self.errors: list[tuple[int, str]] = []     # (line, message), reported in line order
        self.base = os.path.dirname(os.path.abspath(path))

    def fail(self, node, key: str, message: str) -> None:
        line = node.start_mark.line + 1
        self.errors.append((line, f"{self.path}:{line}: {key}: {message}"))

    def stop(self):
        return ConfigError([text for _, text in sorted(self.errors)])

    def read(self) -> Loaded:
        root, self.loader = _compose(self.path)
        try:
            return self._read(root)
        except yaml.MarkedYAMLError as e:     # a value the safe loader refuses (a tag)
            raise ConfigError([_yaml_error(self.path, e)]) from None

    def _read(self, root) -> Loaded:
        if root is None:
            raise ConfigError([f"{self.path}: empty: nothing to serve (give zone: or http: site)"])
        if not isinstance(root, yaml.MappingNode):
            raise ConfigError([f"{self.path}:{root.start_mark.line + 1}: expected sections "
                               f"(server:, zone:, http:, ...), not {root.id}"])
        settings, zones, site = self._sections(root)
        if zones is not None and site is not None:
            self.fail(site[0], "http.site", "one server serves one application: zone: and "
                      "http.site need a file each")
        elif zones is None and site is None:
            self.errors.append((0, f"{self.path}: nothing to serve: give zone: (DNS) or http: site:"))
        if self.errors and (zones is None) == (site is None):
            raise self.stop()
        app = "serve-dns" if zones is not None else "serve-http"
        loaded = self._positionals(app, zones, site)
        for key, (keynode, valnode) in settings.items():
            self._setting(loaded, key, keynode, valnode)
        if app == "serve-dns" and (loaded.args.zone_dir or loaded.args.secondary):
            # transferred zones are kept beside the file by default
            loaded.args.zone_dir = os.path.join(self.base, loaded.args.zone_dir or "")
        if self.errors:
            raise self.stop()
        return loaded

    def _sections(self, root):
        """Settings {"section.key": (key node, value node)}, the zone list's node and the
        site's (key node, value node); unknown sections and bad shapes are noted."""
        known = {k.split(".")[0] for app in APPS for k in self.table[app]} | {"zone", "http"}
        settings, zones, site, seen = {}, None, None, set()
        for keynode, valnode in root.value:
            name = _text(keynode)
            if name in seen:
                self.fail(keynode, name, "given twice")
            elif name not in known:
                self.fail(keynode, name, f"unknown section (known: {', '.join(sorted(known))})")
            elif name == "zone":
                zones = valnode
            elif not isinstance(valnode, yaml.MappingNode):
                self.fail(valnode, name, f"expected keys under {name}:, not a {valnode.id}")
            else:
                for k, v in valnode.value:
                    key = f"{name}.{_text(k)}"
                    if key in settings or (key == "http.site" and site):
                        self.fail(k, key, "given twice")
                    elif key == "http.site":
                        site = (k, v)
                    else:
                        settings[key] = (k, v)
            seen.add(name)
        return settings, zones, site

    def _path(self, node, key: str) -> str:
        value = self.loader.construct_object(node, deep=True)
        if not isinstance(value, str) or not value:
            self.fail(node, key, "expected a path")
            return "."
        return os.path.join(self.base, value)

    def _positionals(self, app: str, zones, site) -> Loaded:
        """The zone list (files and origins) or the site: the command's defaults around them."""
        files, origins = [], []        # files: (path, key, line)
        if site is not None:
            files = [(self._path(site[1], "http.site"), "http.site", site[0].start_mark.line + 1)]
        elif not isinstance(zones, yaml.SequenceNode):
            self.fail(zones, "zone", "expected a list of {domain, file}")
        else:
            for i, item in enumerate(zones.value):
                entry = self._zone_entry(item, f"zone[{i}]")
                if entry is not None:
                    files.append(entry[0])
                    origins.append(entry[1])
        placeholder = [] if app == "serve-dns" else ["."]     # zones may all be --secondary
        args = self.commands[app].parse_args(["--", *([f[0] for f in files] or placeholder)])
        if app == "serve-dns":
            args.origin = origins if any(origins) else []
        return Loaded(self.path, app, args, self.commands, files=files)

    def _zone_entry(self, item, where: str):
        """((file, key, line), domain or None) of one zone: {domain?, file} or a file name."""
        if isinstance(item, yaml.ScalarNode):
            return (self._path(item, where), where, item.start_mark.line + 1), None
        if not isinstance(item, yaml.MappingNode):
            self.fail(item, where, "expected {domain, file} or a file name")
            return None
        entry = {_text(k): (k, v) for k, v in item.value}
        extras = set(entry) - {"domain", "file"}
        for extra in extras:
            self.fail(entry[extra][0], f"{where}.{extra}", "unknown key (domain, file)")
        if "file" not in entry:
            if not extras:           # else a misspelt file: is the one line
                self.fail(item, where, "needs file:")
            return None
        keynode, node = entry["file"]
        domain = self.loader.construct_object(entry["domain"][1]) if "domain" in entry else None
        if domain is not None and not _is_domain(domain):
            self.fail(entry["domain"][1], f"{where}.domain", f"{domain!r}: expected a domain name")
            domain = None
        return (self._path(node, f"{where}.file"), f"{where}.file", keynode.start_mark.line + 1), domain

    def _setting(self, loaded: Loaded, key: str, keynode, valnode) -> None:
        action = self.table[loaded.app].get(key)
        if action is None:
            self.fail(keynode, key, self._unknown(loaded.app, key))
            return
        try:
            if getattr(action.type, "reads_text", False) and isinstance(valnode, yaml.ScalarNode):
                value = convert(action, valnode.value)
            else:
                value = convert(action, self.loader.construct_object(valnode, deep=True))
        except _Bad as e:
            self.fail(valnode, key, str(e))
            return
        setattr(loaded.args, action.dest, value)
        loaded.lines[action.dest] = keynode.start_mark.line + 1
        loaded.keys[action.dest] = key


    def _unknown(self, app: str, key: str) -> str:
        other = next((a for a in APPS if key in self.table[a]), None)
        if other:
            return f"a {other} setting; this file serves {_what(app)}"
        section = key.split(".")[0]
        names = sorted(k.split(".", 1)[1] for k in self.table[app] if k.startswith(section + "."))
        return f"unknown key (known in {section}: {', '.join(names)})"


def _what(app: str) -> str:
    return "zones" if app == "serve-dns" else "a site"


def _is_domain(text) -> bool:
    import dns.exception
    import dns.name
    try:
        return isinstance(text, str) and bool(dns.name.from_text(text))
    except dns.exception.DNSException:
        return False


def load(path: str, commands: dict[str, argparse.ArgumentParser]) -> Loaded:
    """The file as the namespace its serving command would parse; ConfigError lists
    every bad key, value and section, one line each."""
    return _Reader(path, commands).read()


# -- the commands -------------------------------------------------------------------------

def register(sub) -> None:
    """`serve -c FILE [FLAGS]` and `check-config FILE`, after serve-dns and serve-http."""
    commands = {app: sub.choices[app] for app in APPS}
    s = sub.add_parser("serve", help="serve what a configuration file describes",
                       description="Serve the zones or the site a YAML configuration file "
                       "describes (examples/stormpy.yaml). Any serve-dns or serve-http flag "
                       "given here overrides the file's key. SIGHUP reloads the zones or the "
                       "site; the file itself is read once, at start.")
    s.add_argument("-c", "--config", required=True, metavar="FILE", help="the configuration file")
    flags = s.add_argument_group("serve-dns and serve-http flags, overriding the file")
    for app in APPS:
        for action in _settings(commands[app]):
            if action.dest not in POSITIONAL_KEYS and not any(
                    o in s._option_string_actions for o in action.option_strings):
                override = copy.copy(action)
                override.default, override.required = argparse.SUPPRESS, False
                flags._add_action(override)
    c = sub.add_parser("check-config", help="validate a configuration file",
                       description="Check every section, key and value of a configuration file "
                       "as `stormpy serve -c` reads it, and that its zone files or site exist; "
                       "one line per error (file:line: key: problem).")
    c.add_argument("file", metavar="FILE")
    for p in (s, c):
        p.set_defaults(serving_commands=commands)


def apply_overrides(loaded: Loaded, args: argparse.Namespace) -> None:
    """The flags given with `serve -c` replace the file's values."""
    commands = loaded.commands
    own = {a.dest for a in _settings(commands[loaded.app])}
    errors = []
    for dest, value in vars(args).items():
        if dest in ("command", "config", "serving_commands"):
            continue
        if dest not in own:
            other = next(a for a in APPS if dest in {x.dest for x in _settings(commands[a])})
            flag = next(_flag(a) for a in _settings(commands[other]) if a.dest == dest)
            errors.append(f"{flag} is a {other} flag; {loaded.path} serves {_what(loaded.app)}")
            continue
        setattr(loaded.args, dest, value)
        loaded.lines.pop(dest, None)
    if errors:
        raise ConfigError(errors)


def build(loaded: Loaded):
    """The server's config, as serve-dns or serve-http builds it from the same values; a
    bad mix of keys is one line at the key it starts with, flags named by their keys."""
    from stormpy import cli
    builder = {"serve-dns": cli.dns_config, "serve-http": cli.http_config}[loaded.app]
    try:
        return builder(loaded.args)
    except StormpyError as e:
        raise ConfigError([_in_file_terms(loaded, str(e))]) from None


def _in_file_terms(loaded: Loaded, message: str) -> str:
    table = key_table(loaded.commands)[loaded.app]
    keys = {_flag(action): key for key, action in table.items()}
    head, _, rest = message.partition(" ")
    lead = table.get(keys.get(head.rstrip(":"), ""))
    if lead is None or lead.dest not in loaded.lines:
        return f"{loaded.path}: {message}"       # from a flag given with -c, or no key
    return loaded.error(lead.dest, " ".join(keys.get(word, word) for word in rest.split(" ")))


def file_digest(path: str) -> str:
    """The file's bytes' digest, "" where it cannot be read."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return ""


def serve(args) -> int:
    """`stormpy serve -c FILE [FLAGS]`: the file's application, flags over its keys."""
    try:
        loaded = load(args.config, args.serving_commands)
        apply_overrides(loaded, args)
        cfg = build(loaded)
    except ConfigError as e:
        print("\n".join(f"stormpy: error: {line}" for line in e.lines), file=sys.stderr)
        return 1
    cfg.config_file, cfg.config_digest = loaded.path, file_digest(loaded.path)
    if loaded.app == "serve-dns":
        from stormpy.dns.server import serve_dns
        serve_dns(cfg)
    else:
        from stormpy.http.server import serve_http
        serve_http(cfg)
    return 0
