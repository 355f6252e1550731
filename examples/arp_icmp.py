"""ARP and ICMP echo answered in Python: how a host answers "who has this
address?" and ping, one field at a time.

The responder takes every frame of the interface's queues (all_frames), so the
kernel sees none of them on AF_XDP; give it an address the kernel does not have
on that interface, so that on AF_PACKET the kernel stays silent too. No rule
matches anything: every frame goes to answer(), in batches.

    .venv/bin/python examples/arp_icmp.py --address 198.18.0.1 --iface veth0 --backend xdp
    ping 198.18.0.1                     (from the other end of the link)
"""
import argparse
import ipaddress
import struct
import sys

import stormpy

ETH_ARP, ETH_IPV4 = b"\x08\x06", b"\x08\x00"
ARP_REQUEST, ARP_REPLY = 1, 2
ICMP_ECHO_REQUEST, ICMP_ECHO_REPLY = 8, 0


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071): ones' complement sum of 16-bit words."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


class Host:
    def __init__(self, mac: bytes, ip: bytes):
        self.mac, self.ip = mac, ip

    def arp(self, frame: bytes):
        """A request for our address gets our MAC, sent back to the asker."""
        if len(frame) < 42:
            return None
        hw, proto, hlen, plen, op = struct.unpack("!HHBBH", frame[14:22])
        sender_mac, sender_ip, target_ip = frame[22:28], frame[28:32], frame[38:42]
        if (hw, proto, hlen, plen, op) != (1, 0x0800, 6, 4, ARP_REQUEST) or target_ip != self.ip:
            return None
        return (sender_mac + self.mac + ETH_ARP +
                struct.pack("!HHBBH", 1, 0x0800, 6, 4, ARP_REPLY) +
                self.mac + self.ip + sender_mac + sender_ip)

    def icmp(self, frame: bytes):
        """An echo request to our address comes back as an echo reply: addresses
        swapped, type 0, both checksums made again."""
        if len(frame) < 34 or frame[14] >> 4 != 4:
            return None
        ihl = (frame[14] & 0x0F) * 4
        total = struct.unpack("!H", frame[16:18])[0]
        if ihl < 20 or frame[23] != 1 or frame[30:34] != self.ip or len(frame) < 14 + total:
            return None
        if checksum(frame[14:14 + ihl]) != 0 or struct.unpack("!H", frame[20:22])[0] & 0x3FFF:
            return None                      # damaged, or a fragment
        icmp = frame[14 + ihl:14 + total]
        if len(icmp) < 8 or icmp[0] != ICMP_ECHO_REQUEST or checksum(icmp) != 0:
            return None
        reply = bytes([ICMP_ECHO_REPLY, 0]) + b"\0\0" + icmp[4:]
        reply = reply[:2] + struct.pack("!H", checksum(reply)) + reply[4:]
        ip = bytearray(frame[14:34])         # options are not echoed: a 20-byte header
        ip[0], ip[2:4], ip[8] = 0x45, struct.pack("!H", 20 + len(reply)), 64
        ip[10:12], ip[12:16], ip[16:20] = b"\0\0", self.ip, frame[26:30]
        ip[10:12] = struct.pack("!H", checksum(bytes(ip)))
        return frame[6:12] + self.mac + ETH_IPV4 + bytes(ip) + reply

    def answer(self, packets):
        """The handler: one batch of frames in, the replies out."""
        replies = []
        for packet in packets:
            frame = bytes(packet.data)
            kind = frame[12:14]
            reply = self.arp(frame) if kind == ETH_ARP else \
                self.icmp(frame) if kind == ETH_IPV4 else None
            if reply:
                replies.append(reply)
        return replies


def main(argv=None) -> int:
    own = argparse.ArgumentParser(prog="arp_icmp.py", add_help=False)   # serve() has --help
    own.add_argument("--address", required=True, help="the IPv4 address to answer for")
    own.add_argument("--iface", help="the interface whose rings it answers on")
    args, rest = own.parse_known_args(argv)
    if args.iface is None:
        own.error("--iface IFACE is required: ARP and ping come as whole frames, which only "
                  "an interface's rings carry (a --listen socket gets UDP payloads)")
    try:
        ip = ipaddress.IPv4Address(args.address).packed
    except ValueError:
        print(f"arp_icmp.py: error: --address {args.address}: not an IPv4 address", file=sys.stderr)
        return 1
    try:
        with open(f"/sys/class/net/{args.iface}/address") as f:
            mac = bytes.fromhex(f.read().strip().replace(":", ""))
    except OSError:
        print(f"arp_icmp.py: error: --iface {args.iface}: no such network interface",
              file=sys.stderr)
        return 1
    host = Host(mac, ip)
    stack = stormpy.Responder(7, name=f"ARP and ping for {args.address}", handler=host.answer,
                              all_frames=True)
    return stormpy.serve(stack, rest + ["--iface", args.iface], prog="arp_icmp.py")


if __name__ == "__main__":
    raise SystemExit(main())
