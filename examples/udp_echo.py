"""UDP echo, the server side of the round-trip-time experiment in seeds/000: a
client sends 32 bytes to port 4321 and times the echo.

A rule answers every datagram in C by echoing its payload into an empty template;
no packet reaches Python. The defaults favour latency over throughput: workers
spin on their ring instead of sleeping in poll() (busy polling; on sockets,
SO_BUSY_POLL), and every batch is sent at once. Pin a worker next to its queue's
interrupt with --cpus, as the experiment does.

    .venv/bin/python examples/udp_echo.py --listen 127.0.0.1:4321
    .venv/bin/python examples/udp_echo.py --iface eth1 --backend xdp --cpus 1
"""
import stormpy

echo = stormpy.Responder(4321, name="udp echo")
echo.rule("echo", template=stormpy.Template(b"", echo=slice(0, None)))

if __name__ == "__main__":
    raise SystemExit(stormpy.serve(echo, poll="busy", tx_flush_us=0))
