"""The configuration file: every serve-dns/serve-http flag has a key that reads back as the
flag does, flags given with `serve -c` win, every mistake is one `file:line: key:` line,
and `stormpy serve -c` serves a zone (dnspython) and a site (urllib) from a file."""
import argparse
import os
import pwd
import shutil
import signal
import subprocess
import sys
import urllib.request

import dns.message
import dns.rdatatype
import pytest
import yaml

from conftest import EXAMPLE_ZONE, REPO
from stormpy import cli, configfile
from support.client import tcp_many, udp
from support.http import HttpServerProcess
from support.process import ServerProcess
from support.servers import StormpyServer

# A valid value for each metavar, so a new flag needs nothing here unless it brings a
# new kind of value.
SAMPLES = {"N": "3", "S": "2.5", "BYTES": "1400", "BITS": "20", "TEXT": "sample text",
           "ADDR:PORT": "127.0.0.1:5300", "NAME": "nobody", "IFACE": "lo", "LIST": "0-1",
           "US": "80", "PATH": "/tmp/stormpy-sample.sock", "PREFIX": "192.0.2.0/24",
           "stderr|syslog|FILE": "/tmp/stormpy-sample.log", "MIB": "8", "ZONE": "example.net.",
           "ADDR[:PORT]": "192.0.2.1:5300", "NAME:ALG:SECRET": "k:hmac-sha256:c2VjcmV0",
           "DIR": "/tmp", "ID": "0x6e7331"}


def commands():
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def natural(text: str):
    """What YAML would hold for text typed in a file: a number where it is one."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def sample(action):
    """(the flag's words on a command line, the key's value in a file)."""
    flag = configfile._flag(action)
    if isinstance(action, argparse._CountAction):
        return [flag, flag], 2
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction,
                           argparse.BooleanOptionalAction)):
        return [flag], True
    if action.choices:
        text = next(str(c) for c in action.choices if c != action.default)
    elif action.metavar in SAMPLES:
        text = SAMPLES[action.metavar]
    else:
        pytest.fail(f"{flag}: give its metavar {action.metavar!r} a sample value in SAMPLES")
    if isinstance(action, argparse._AppendAction):
        return [flag, text, flag, text], [natural(text), natural(text)]
    return [flag, text], natural(text)


def write(path, doc) -> str:
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return str(path)


@pytest.mark.parametrize("app", configfile.APPS)
def test_every_flag_has_a_key_that_reads_back_as_the_flag(app, tmp_path):
    cmds = commands()
    table = configfile.key_table(cmds)[app]
    argv, doc = [], {}
    for key, action in table.items():
        words, value = sample(action)
        argv += words
        section, name = key.split(".", 1)
        doc.setdefault(section, {})[name] = value
    flagged = {a.dest for a in cmds[app]._actions if a.option_strings} - {"help", "origin"}
    assert {a.dest for a in table.values()} == flagged, "a flag without a key"
    if app == "serve-dns":
        doc["zone"] = [{"domain": "example.com.", "file": EXAMPLE_ZONE}]
        argv = [EXAMPLE_ZONE, "--origin", "example.com."] + argv
    else:
        doc.setdefault("http", {})["site"] = str(tmp_path)
        argv = [str(tmp_path)] + argv
    from_flags = vars(cli.build_parser().parse_args([app] + argv))
    from_flags.pop("command")
    loaded = configfile.load(write(tmp_path / "stormpy.yaml", doc), cmds)
    assert loaded.app == app and vars(loaded.args) == from_flags
    # and every flag is taken by `serve -c` to override the file, with the same value
    options = argv[3:] if app == "serve-dns" else argv[1:]
    overrides = vars(cli.build_parser().parse_args(["serve", "-c", "f.yaml"] + options))
    for dest in ("command", "config", "serving_commands"):
        overrides.pop(dest)
    assert overrides == {d: v for d, v in from_flags.items() if d in overrides}
    assert set(overrides) == {a.dest for a in table.values()}


def test_a_file_builds_the_same_server_config_as_its_flags(tmp_path):
    path = write(tmp_path / "stormpy.yaml", {
        "server": {"listen": ["127.0.0.1:5300", "[::1]:5300"], "workers": 2, "batch": 64,
                   "control": "", "chaos-identity": "ns1", "cpus": "0,1"},
        "rrl": {"rate": 20, "slip": 0, "allow": "198.18.0.0/15"},
        "log": {"verbose": 1},
        "zone": [EXAMPLE_ZONE]})
    from_file = cli.dns_config(configfile.load(path, commands()).args)
    from_flags = cli.dns_config(cli.build_parser().parse_args([
        "serve-dns", EXAMPLE_ZONE, "--listen", "127.0.0.1:5300", "--listen", "[::1]:5300",
        "--workers", "2", "--batch", "64", "--control", "", "--chaos-identity", "ns1",
        "--cpus", "0,1", "--rrl-rate", "20", "--rrl-slip", "0", "--rrl-allow", "198.18.0.0/15",
        "-v"]))
    assert from_file == from_flags
    assert from_file.listen == [("127.0.0.1", 5300), ("::1", 5300)] and from_file.cpus == [0, 1]


def test_flags_given_with_serve_override_the_file(tmp_path):
    path = write(tmp_path / "stormpy.yaml", {
        "server": {"listen": ["127.0.0.1:5300", "127.0.0.2:5300"], "workers": 4, "batch": 16},
        "zone": [{"file": EXAMPLE_ZONE}]})
    args = cli.build_parser().parse_args(["serve", "-c", path, "--workers", "2",
                                          "--listen", "127.0.0.3:53", "--max-udp", "1400"])
    loaded = configfile.load(path, args.serving_commands)
    configfile.apply_overrides(loaded, args)
    cfg = cli.dns_config(loaded.args)
    assert cfg.workers == 2 and cfg.max_udp == 1400 and cfg.batch == 16
    assert cfg.listen == [("127.0.0.3", 53)]          # a repeatable flag replaces the list


def test_a_flag_of_the_other_command_is_one_line(tmp_path, capsys):
    path = write(tmp_path / "stormpy.yaml", {"zone": [EXAMPLE_ZONE]})
    assert cli.main(["serve", "-c", path, "--max-connections", "3"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"stormpy: error: --max-connections is a serve-http flag; {path} serves zones"]


def test_zone_files_and_the_site_are_relative_to_the_file(tmp_path, monkeypatch):
    shutil.copy(EXAMPLE_ZONE, tmp_path / "example.zone")
    path = write(tmp_path / "stormpy.yaml", "zone:\n  - example.zone\n")
    monkeypatch.chdir("/")
    assert configfile.load(path, commands()).args.zones == [str(tmp_path / "example.zone")]


ZONE = "zone:\n  - example.zone\n"
# (file text, the one line expected after "stormpy.yaml:")
BAD = [
    ("server:\n  workers: 2\n  wrokers: 3\n" + ZONE, "3: server.wrokers: unknown key"),
    ("server:\n  workers: 0\n" + ZONE, "2: server.workers: 0 must be at least 1"),
    ("server:\n  backend: dpdk\n" + ZONE,
     "2: server.backend: 'dpdk' is not one of socket, xdp, packet, netmap"),
    ("rrl:\n  rate: many\n" + ZONE, "2: rrl.rate: 'many' is not a whole number"),
    ("server:\n  workers: [1, 2]\n" + ZONE, "2: server.workers: expected one value, not a list"),
    ("server:\n  user:\n" + ZONE, "2: server.user: needs a value"),
    ("log:\n  verbose: yes\n" + ZONE, "2: log.verbose: expected a whole number from 0"),
    ("server: 3\n" + ZONE, "1: server: expected keys under server:, not a scalar"),
    (ZONE + "secondary:\n  master: 192.0.2.1\n", "3: secondary: unknown section"),
    ("server:\n  workers: 2\n  workers: 3\n" + ZONE, "3: server.workers: given twice"),
    (ZONE + "http:\n  max-connections: 9\n",
     "4: http.max-connections: a serve-http setting; this file serves zones"),
    ("zone: example.zone\n", "1: zone: expected a list of {domain, file}"),
    ("zone:\n  - domain: example.com.\n    fil: example.zone\n", "3: zone[0].fil: unknown key"),
    ("zone:\n  - domain: example.com.\n", "2: zone[0]: needs file:"),
    ("zone:\n  - domain: 3\n    file: example.zone\n", "2: zone[0].domain: 3: expected a domain"),
    ("zone:\n  - {domain: a..b, file: example.zone}\n", "2: zone[0].domain: 'a..b': expected"),
    ("zone:\n  - missing.zone\n", "2: zone[0]: "),
    ("server:\n  listen: [300.1.1.1:53]\n" + ZONE, "2: server.listen: 300.1.1.1:53: expected"),
    ("server:\n  backend: packet\n" + ZONE, "2: server.backend: packet needs server.iface"),
    ("server:\n  workers: 2\n   batch: 3\n" + ZONE, "3: YAML: mapping values are not allowed"),
    ("server:\n  user: !!python/name:os.system x\n" + ZONE, "2: YAML: could not determine a constructor"),
    ("server:\n  [a, b]: 1\n" + ZONE, "2: server.(sequence): unknown key"),
    (ZONE + "http:\n  site: .\n", "4: http.site: one server serves one application"),
]


@pytest.mark.parametrize("text,line", BAD, ids=[b[1].split(":")[1].strip() or b[1] for b in BAD])
def test_each_mistake_is_one_line_naming_file_line_and_key(text, line, tmp_path, capsys):
    shutil.copy(EXAMPLE_ZONE, tmp_path / "example.zone")
    path = write(tmp_path / "stormpy.yaml", text)
    assert cli.main(["check-config", path]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{path}:{line}"), lines


def test_a_value_is_refused_in_the_same_words_as_its_flag(tmp_path, capsys):
    path = write(tmp_path / "stormpy.yaml", {"server": {"max-udp": 100}, "zone": [EXAMPLE_ZONE]})
    assert cli.main(["check-config", path]) == 1
    in_file = capsys.readouterr().err.strip().split("server.max-udp: ")[1]
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["serve-dns", EXAMPLE_ZONE, "--max-udp", "100"])
    assert capsys.readouterr().err.strip().endswith(f"argument --max-udp: {in_file}")


def test_every_mistake_in_a_file_gets_its_own_line_in_line_order(tmp_path, capsys):
    path = write(tmp_path / "stormpy.yaml", "server:\n  workers: 0\n  nope: 1\nrrl:\n  slip: -1\n"
                 "dnssec: {}\nzone:\n  - " + EXAMPLE_ZONE + "\n")
    assert cli.main(["check-config", path]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert [l.split(":")[1] for l in lines] == ["2", "3", "5", "6"], lines


def stormpy(*args):
    return subprocess.run([sys.executable, "-m", "stormpy", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("text", [None, "", "[1, 2]\n", "server: {workers: 2}\n", "\xff"])
def test_an_unusable_file_is_one_line_never_a_traceback(text, tmp_path):
    path = tmp_path / "stormpy.yaml"
    if text == "\xff":
        path.write_bytes(b"\xff\xfe")
    elif text is not None:
        path.write_text(text)
    r = stormpy("check-config", str(path))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(str(path)), r.stderr
    r = stormpy("serve", "-c", str(path))
    assert r.returncode == 1 and r.stderr.startswith(f"stormpy: error: {path}"), r.stderr


def test_the_example_config_checks_out(tmp_path):
    # its user exists where it is deployed (the unit files say: useradd); here, the test's own
    with open(os.path.join(REPO, "examples", "stormpy.yaml")) as f:
        text = f.read()
    assert "  user: stormpy " in text
    me = pwd.getpwuid(os.getuid()).pw_name
    (tmp_path / "stormpy.yaml").write_text(text.replace("  user: stormpy ", f"  user: {me} "))
    shutil.copy(EXAMPLE_ZONE, tmp_path / "example.zone")
    r = stormpy("check-config", str(tmp_path / "stormpy.yaml"))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.splitlines() == [f"{tmp_path / 'stormpy.yaml'}: ok: serve-dns of 1 zone "
                                     "file(s) on 192.0.2.53:53, [2001:db8::53]:53, socket backend"]
    with open(os.path.join(REPO, "examples", "systemd", "stormpy.service")) as f:
        unit = f.read()
    assert "\nExecStart=/usr/local/bin/stormpy serve -c /etc/stormpy/stormpy.yaml\n" in unit


def test_a_listen_address_without_a_port_takes_the_protocols_port(tmp_path):
    """As Knot DNS and nginx read `listen: ADDR`: 53 and 80, not the unprivileged port
    of the default address."""
    shutil.copy(EXAMPLE_ZONE, tmp_path / "example.zone")
    path = write(tmp_path / "dns.yaml", {"zone": ["example.zone"],
                                         "server": {"listen": ["127.0.0.1", "[::1]"]}})
    r = stormpy("check-config", path)
    assert r.returncode == 0 and "on 127.0.0.1:53, [::1]:53," in r.stdout, r.stdout + r.stderr
    (tmp_path / "site").mkdir()
    path = write(tmp_path / "http.yaml", {"http": {"site": "site"},
                                          "server": {"listen": ["127.0.0.1"]}})
    r = stormpy("check-config", path)
    assert r.returncode == 0 and "on 127.0.0.1:80," in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("server, words", [
    ({"user": "no-such-user-here"}, "user no-such-user-here: no such user on this machine"),
    ({"listen": ["127.0.0.1:5300", "127.0.0.1:5300"]}, "127.0.0.1:5300 is given twice"),
    ({"listen": ["[::1]:5300", "[0:0::1]:5300"]}, "[::1]:5300 is given twice"),
])
def test_check_config_refuses_what_serve_would_refuse_at_start(server, words, tmp_path):
    """check-config said ok, then serve failed: an unknown user, an address twice (whose
    second bind read as another server holding the port)."""
    shutil.copy(EXAMPLE_ZONE, tmp_path / "example.zone")
    path = write(tmp_path / "s.yaml", {"zone": ["example.zone"], "server": server})
    r = stormpy("check-config", path)
    assert r.returncode == 1 and words in r.stderr and "Traceback" not in r.stderr, r.stderr


class ConfigDnsServer(ServerProcess):
    """`python -m stormpy serve -c FILE [flags]`, ready once it answers UDP."""
    name = "stormpy-config"
    cwd, env = StormpyServer.cwd, StormpyServer.env

    def __init__(self, config, extra_args=()):
        super().__init__()
        self.config, self.extra_args = str(config), list(extra_args)

    def command(self):
        return [sys.executable, "-m", "stormpy", "serve", "-c", self.config, *self.extra_args]


def test_serve_c_answers_a_zone_and_reloads_it_on_sighup(example_zone_copy, tmp_path):
    from test_reload import rewrite, wait_for, www_address
    srv = ConfigDnsServer(tmp_path / "stormpy.yaml", ["--chaos-identity", "from-the-flag"])
    write(tmp_path / "stormpy.yaml", {
        "server": {"listen": [f"127.0.0.1:{srv.port}"], "workers": 1, "control": "",
                   "chaos-identity": "from-the-file"},
        "zone": [{"domain": "example.com.", "file": example_zone_copy.name}]})
    with srv:
        assert www_address(srv.addr) == "192.0.2.80"
        (r,) = tcp_many([dns.message.make_query("mail.example.com", "A")], srv.addr)
        assert [rr.address for rr in r.answer[0]] == ["192.0.2.25"]
        r = udp(dns.message.make_query("id.server", "TXT", rdclass="CH"), srv.addr)
        assert r.answer[0][0].strings == (b"from-the-flag",)
        rewrite(example_zone_copy, "192.0.2.80", "192.0.2.81")
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: www_address(srv.addr) == "192.0.2.81"), srv.output()
        assert "changed since the start" not in srv.output()
        # a zone added to the file is not read by a reload (Knot's is): say so
        with open(tmp_path / "stormpy.yaml", "a") as f:
            f.write("# another zone, once it is written\n")
        rewrite(example_zone_copy, "192.0.2.81", "192.0.2.82")
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: www_address(srv.addr) == "192.0.2.82"), srv.output()
        assert wait_for(lambda: "stormpy.yaml changed since the start: a reload reads the "
                                "zone files or the site again, not the configuration"
                                in srv.output())


class ConfigHttpServer(HttpServerProcess):
    def command(self):
        return [sys.executable, "-m", "stormpy", "serve", "-c", *self.extra_args]


def test_serve_c_serves_a_site(tmp_path):
    site = tmp_path / "www"
    site.mkdir()
    (site / "index.html").write_text("<h1>from a config file</h1>\n")
    srv = ConfigHttpServer(site, [str(tmp_path / "stormpy.yaml")])
    write(tmp_path / "stormpy.yaml", {
        "server": {"listen": f"127.0.0.1:{srv.port}", "workers": 1, "control": ""},
        "http": {"site": "www", "keepalive-timeout": 5}})
    with srv:
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/", timeout=10) as resp:
            assert resp.status == 200 and resp.read() == b"<h1>from a config file</h1>\n"


def test_secondary_zones_alone_and_their_keys(tmp_path):
    """A file may serve only --secondary zones (zone: []); zone-dir is the file's
    directory unless given, relative to it when given; bad values name their line."""
    path = tmp_path / "s.yaml"
    path.write_text("server:\n  secondary: [example.com]\n  primary: [192.0.2.1]\n"
                    "  tsig: k:hmac-sha256:c2VjcmV0\n  transfer-allow: [192.0.2.0/24]\nzone: []\n")
    loaded = configfile.load(str(path), commands())
    cfg = configfile.build(loaded)
    assert cfg.secondaries == ["example.com"] and cfg.primaries == ["192.0.2.1"]
    assert os.path.samefile(cfg.zone_dir, tmp_path)
    (tmp_path / "zones").mkdir()
    path.write_text("server:\n  secondary: [example.com]\n  primary: [192.0.2.1]\n"
                    "  zone-dir: zones\nzone: []\n")
    assert configfile.build(configfile.load(str(path), commands())).zone_dir == str(tmp_path / "zones")
    path.write_text("server:\n  secondary: [example.com]\n  primary: [192.0.2.1:70000]\nzone: []\n")
    r = subprocess.run([sys.executable, "-m", "stormpy", "check-config", str(path)], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"{path}:3: server.primary: '192.0.2.1:70000': the port must be 1-65535"


def test_check_config_loads_and_compiles_the_zones_as_serving_would(tmp_path):
    """A zone that serving would refuse fails the check, in the zone's own file:line
    words; the config file itself being fine is not enough."""
    good = tmp_path / "example.zone"
    shutil.copy(EXAMPLE_ZONE, good)
    bad = write(tmp_path / "bad.zone", "$ORIGIN bad.example.\n$TTL 300\n"
                "@ IN SOA ns hostmaster 1 2 3 4 5\nwww IN A 192.0.2.300\n")
    path = write(tmp_path / "stormpy.yaml", {"zone": [str(good), bad]})
    r = stormpy("check-config", path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.splitlines() == [r.stderr.strip()] and f"{bad}:4" in r.stderr, r.stderr
    path = write(tmp_path / "stormpy.yaml", {"zone": [str(good)]})
    assert stormpy("check-config", path).returncode == 0
