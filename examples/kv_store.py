"""A key-value store: `GET key` over UDP answered in C from prepackaged values,
changed while serving by `SET key value` and `DEL key` over TCP.

The values live in the worker's table as ready-made replies. A GET is matched,
its key cut out and looked up, and the reply sent, all in the C loop. The TCP
side is the control plane: it runs in the server process, and each change
publishes a new table that every worker takes at its next batch, never half of
one. It listens on 127.0.0.1 only, on the port the GETs are served on: whoever
reaches it can change every answer.

    .venv/bin/python examples/kv_store.py --listen 127.0.0.1:6380
    echo -n 'GET hello' | nc -u -w1 127.0.0.1 6380        VALUE world
    echo 'SET hello there' | nc -q1 127.0.0.1 6380          OK
"""
import asyncio

import stormpy
from stormpy.errors import StormpyError

PORT = 6380


def value(text: bytes) -> bytes:
    return b"VALUE " + text + b"\n"


store = stormpy.Responder(PORT, name="key-value store")
store.rule("get", prefix=b"GET ", key=slice(4, None), key_stop=b"\r\n ",
           values={"hello": value(b"world")}, default=b"NOT_FOUND\n")


async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
    try:
        async for line in reader:
            words = line.decode(errors="replace").split(maxsplit=2)
            if len(words) == 3 and words[0] == "SET":
                store.update("get", set_values={words[1]: value(words[2].rstrip().encode())})
            elif len(words) == 2 and words[0] == "DEL":
                store.update("get", delete=[words[1]])
            else:
                writer.write(b"ERROR expected SET key value, or DEL key\n")
                continue
            writer.write(b"OK\n")
            await writer.drain()
    except (ConnectionError, StormpyError) as e:
        writer.write(f"ERROR {e}\n".encode())
    finally:
        writer.close()


@store.control
async def accept_changes(responder: stormpy.Responder):
    server = await asyncio.start_server(client, "127.0.0.1", responder.port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    raise SystemExit(stormpy.serve(store))
