"""UDP echo answered in Python, the first step of docs/RESPONDERS.md: the handler
gets each batch of datagrams no rule answered, and returns the replies."""
import stormpy


def echo(packets):
    return [(packet, packet.payload) for packet in packets]


server = stormpy.Responder(4321, name="udp echo in Python", handler=echo)

if __name__ == "__main__":
    raise SystemExit(stormpy.serve(server))
