/* The load generator (native/gen/) under ASan/UBSan against servers in threads on
 * socket pairs: echo and DNS replies matched and counted, every other one dropped
 * and counted lost, DNS rcodes counted; HTTP responses cut into single bytes,
 * pipelined, with and without bodies, and a chunked one the reader refuses; DNS as
 * frames on the memory backend, checksums checked. */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "check.h"
#include "stormpy/gen/gen.h"
#include "stormpy/io.h"
#include "stormpy/proto/csum.h"
#include "stormpy/proto/eth.h"
#include "stormpy/proto/udpip.h"

#define MS 1000000ull

struct server {
    int fd;
    int drop_every;              /* datagrams: drop every Nth */
    int dns;                     /* datagrams: answer as DNS, NXDOMAIN for odd IDs */
    int chunked_after;           /* http: the response after this many is chunked */
    int stop;
};

static void receive_timeout(int fd)
{
    struct timeval tv = { .tv_sec = 0, .tv_usec = 100000 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static void *datagram_server(void *arg)
{
    struct server *s = arg;
    uint8_t buf[2048];
    receive_timeout(s->fd);
    for (int n = 1; !__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE); n++) {
        ssize_t len = recv(s->fd, buf, sizeof(buf), 0);
        if (len <= 0 || (s->drop_every && n % s->drop_every == 0))
            continue;
        if (s->dns) {
            buf[2] |= 0x80;
            buf[3] = (buf[1] & 1) ? 3 : 0;
        }
        send(s->fd, buf, (size_t)len, 0);
    }
    return NULL;
}

static const char *const RESPONSES[] = {
    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
    "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
};

/* Answers each request head; the first few a byte at a time. */
static void *http_server(void *arg)
{
    struct server *s = arg;
    char buf[4096];
    int seen = 0, answered = 0, matched = 0;
    receive_timeout(s->fd);
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        ssize_t len = recv(s->fd, buf, sizeof(buf), 0);
        for (ssize_t i = 0; i < len; i++) {       /* "\r\n\r\n" ends a head */
            matched = buf[i] == "\r\n\r\n"[matched] ? matched + 1 : buf[i] == '\r';
            if (matched == 4) {
                seen++;
                matched = 0;
            }
        }
        for (; answered < seen; answered++) {
            const char *r = answered == s->chunked_after ?
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" :
                RESPONSES[answered % 3];
            size_t rlen = strlen(r);
            if (answered < 20)
                for (size_t k = 0; k < rlen; k++)
                    send(s->fd, r + k, 1, MSG_NOSIGNAL);
            else
                send(s->fd, r, rlen, MSG_NOSIGNAL);
        }
    }
    return NULL;
}

static struct sp_gen_counters run(struct sp_gen_config *cfg, struct server *servers,
                                  int nservers, void *(*serve)(void *), int type)
{
    struct sp_gen_counters c;
    pthread_t threads[4];
    int fds[4];
    memset(&c, 0, sizeof(c));
    for (int i = 0; i < nservers; i++) {
        int pair[2];
        CHECK_EQ(socketpair(AF_UNIX, type, 0, pair), 0);
        fds[i] = pair[0];
        servers[i].fd = pair[1];
        pthread_create(&threads[i], NULL, serve, &servers[i]);
    }
    cfg->fds = fds;
    cfg->nfds = (uint32_t)nservers;
    struct sp_gen *g = sp_gen_new(cfg);
    CHECK(g != NULL);
    if (g) {
        CHECK_EQ(sp_gen_run(g, &c), 0);
        const struct sp_latency *lat = sp_gen_latency(g);
        CHECK_EQ(lat->total, c.received);
        CHECK(sp_latency_percentile(lat, 50) <= sp_latency_percentile(lat, 99));
        CHECK(sp_latency_percentile(lat, 99) <= lat->max);
        sp_gen_free(g);
    }
    for (int i = 0; i < nservers; i++) {
        __atomic_store_n(&servers[i].stop, 1, __ATOMIC_RELEASE);
        pthread_join(threads[i], NULL);
        close(fds[i]);
        close(servers[i].fd);
    }
    CHECK_EQ(c.sent, c.received + c.lost);
    return c;
}

static void datagrams(void)
{
    uint8_t req[64] = { 0 };
    uint32_t offsets[] = { 0, sizeof(req) };
    struct sp_gen_config cfg = { .kind = SP_GEN_ECHO, .requests = req, .offsets = offsets,
                                 .nrequests = 1, .outstanding = 8, .count = 5000,
                                 .timeout_ns = 1000 * MS, .batch = 32 };
    struct server s[2] = { { 0 }, { 0 } };
    struct sp_gen_counters c = run(&cfg, s, 2, datagram_server, SOCK_DGRAM);
    CHECK_EQ(c.sent, 5000);
    CHECK_EQ(c.received, 5000);
    CHECK_EQ(c.unmatched + c.late + c.bad_replies, 0);

    /* open loop, every other datagram dropped: exactly half lost */
    cfg.outstanding = 0;
    cfg.rate = 20000;
    cfg.count = 1000;
    cfg.timeout_ns = 500 * MS;             /* the dropped ones end the run after it */
    struct server dropping = { .drop_every = 2 };
    c = run(&cfg, &dropping, 1, datagram_server, SOCK_DGRAM);
    CHECK_EQ(c.sent, 1000);
    CHECK_EQ(c.received, 500);
    CHECK_EQ(c.lost, 500);
    CHECK(c.send_end_ns - c.started_ns >= 49 * MS);      /* 1000 at 20,000/s: 50 ms */

    /* DNS: IDs sequential on the socket, NXDOMAIN for odd ones */
    uint8_t query[17] = { 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1 };
    uint32_t qoff[] = { 0, sizeof(query) };
    struct sp_gen_config dns = { .kind = SP_GEN_DNS, .requests = query, .offsets = qoff,
                                 .nrequests = 1, .outstanding = 16, .count = 4000,
                                 .timeout_ns = 1000 * MS, .batch = 64 };
    struct server d = { .dns = 1 };
    c = run(&dns, &d, 1, datagram_server, SOCK_DGRAM);
    CHECK_EQ(c.received, 4000);
    CHECK_EQ(c.codes[0], 2000);
    CHECK_EQ(c.codes[3], 2000);
}

static void http(void)
{
    const char *get = "GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    uint32_t offsets[] = { 0, (uint32_t)strlen(get) };
    struct sp_gen_config cfg = { .kind = SP_GEN_HTTP, .requests = (const uint8_t *)get,
                                 .offsets = offsets, .nrequests = 1, .outstanding = 8,
                                 .pipeline = 4, .count = 3000, .timeout_ns = 1000 * MS,
                                 .batch = 32 };
    struct server s[2] = { { .chunked_after = -1 }, { .chunked_after = -1 } };
    struct sp_gen_counters c = run(&cfg, s, 2, http_server, SOCK_STREAM);
    CHECK_EQ(c.received, 3000);
    CHECK_EQ(c.codes[2] + c.codes[3] + c.codes[4], 3000);
    CHECK(c.codes[2] >= 999 && c.codes[3] >= 999 && c.codes[4] >= 999);
    CHECK_EQ(c.closed + c.bad_replies + c.unmatched, 0);

    /* a chunked body cannot be followed: the connection ends, its requests lost */
    struct server chunked = { .chunked_after = 5 };
    cfg.count = 100;
    c = run(&cfg, &chunked, 1, http_server, SOCK_STREAM);
    CHECK_EQ(c.received, 5);
    CHECK_EQ(c.bad_replies, 1);
    CHECK_EQ(c.closed, 1);
    CHECK(c.lost >= 1 && c.sent < 100);
}

/* DNS as frames on the memory backend: the queries it writes pass the checksums the
 * ring backends check, and the replies it is handed (one a duplicate) are matched. */
static void rings(void)
{
    static const uint8_t client_mac[6] = { 2, 0, 0, 0, 0, 1 }, server_mac[6] = { 2, 0, 0, 0, 0, 2 };
    struct sp_udpip from_client = { .family = 4, .src = { 198, 18, 0, 2 },
                                    .dst = { 198, 18, 0, 1 }, .sport = 40000, .dport = 53 };
    static uint8_t blob[65 * 80];
    size_t len = 0;
    for (int k = 0; k < 65; k++) {             /* reply 11 comes twice */
        int id = k <= 11 ? k : k - 1;
        uint8_t *rec = blob + len, *f = rec + 2;
        uint8_t payload[12] = { 0, (uint8_t)id, 0x80, id & 1 ? 3 : 0 };
        memcpy(f, client_mac, 6);
        memcpy(f + 6, server_mac, 6);
        sp_put16(f + 12, SP_ETHERTYPE_IPV4);
        size_t h = sp_udpip_write_reply(f + SP_ETH_HEADER_LEN, &from_client, sizeof(payload),
                                        sp_csum_partial(payload, sizeof(payload), 0), 64);
        memcpy(f + SP_ETH_HEADER_LEN + h, payload, sizeof(payload));
        size_t flen = SP_ETH_HEADER_LEN + h + sizeof(payload);
        sp_put16(rec, (uint16_t)flen);
        len += 2 + flen;
    }
    struct sp_io *io = sp_mem_io_open(blob, len, 1, 1 << 16);
    struct sp_gen_ring ring = { .io = io, .family = 4, .src = { 198, 18, 0, 2 },
                                .dst = { 198, 18, 0, 1 }, .sport = 40000, .dport = 53, .ttl = 64 };
    memcpy(ring.src_mac, client_mac, 6);
    memcpy(ring.dst_mac, server_mac, 6);
    uint8_t query[17] = { 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1 };
    uint32_t qoff[] = { 0, sizeof(query) };
    struct sp_gen_config cfg = { .kind = SP_GEN_DNS, .nfds = 1, .ring = &ring,
                                 .requests = query, .offsets = qoff, .nrequests = 1,
                                 .outstanding = 32, .count = 64, .timeout_ns = 200 * MS,
                                 .batch = 32 };
    struct sp_gen_counters c;
    memset(&c, 0, sizeof(c));
    struct sp_gen *g = sp_gen_new(&cfg);
    CHECK(g != NULL && io != NULL);
    if (!g || !io)
        return;
    CHECK_EQ(sp_gen_run(g, &c), 0);
    CHECK_EQ(c.sent, 64);
    CHECK_EQ(c.received, 64);
    CHECK_EQ(c.codes[0], 32);
    CHECK_EQ(c.codes[3], 32);
    CHECK_EQ(c.unmatched, 1);
    size_t got = 0, at = 0;
    const uint8_t *sent = sp_mem_io_captured(io, &got);
    for (int k = 0; at + 2 <= got; k++) {
        size_t flen = (size_t)sent[at] << 8 | sent[at + 1];
        const uint8_t *f = sent + at + 2;
        struct sp_udpip u;
        CHECK(memcmp(f, server_mac, 6) == 0 && memcmp(f + 6, client_mac, 6) == 0);
        CHECK(sp_udpip_parse(f + SP_ETH_HEADER_LEN, flen - SP_ETH_HEADER_LEN, &u));
        CHECK(sp_udpip_checksums_ok(f + SP_ETH_HEADER_LEN, &u, false));
        CHECK(u.sport == 40000 && u.dport == 53 && u.payload_len == sizeof(query));
        CHECK_EQ(f[SP_ETH_HEADER_LEN + u.payload_off + 1], k);    /* the ID */
        at += 2 + flen;
    }
    sp_gen_free(g);
    io->ops->close(io);
}

int main(void)
{
    datagrams();
    http();
    rings();
    return check_report("test_gen");
}
