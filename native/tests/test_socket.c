/* The socket backend on loopback: a wildcard socket (IP_PKTINFO / IPV6_RECVPKTINFO on)
 * learns each datagram's destination and answers from it; a socket bound to one
 * address reports none and answers from its own. Every loopback address 127.x is
 * local, so one wildcard socket is asked on two of them. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "check.h"
#include "stormpy/io/socket.h"

union addr {
    struct sockaddr sa;
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    struct sockaddr_storage any;
};

static socklen_t addr_make(union addr *a, int family, const char *text, uint16_t port)
{
    memset(a, 0, sizeof(*a));
    if (family == AF_INET) {
        a->v4.sin_family = AF_INET;
        a->v4.sin_port = htons(port);
        inet_pton(AF_INET, text, &a->v4.sin_addr);
        return sizeof(a->v4);
    }
    a->v6.sin6_family = AF_INET6;
    a->v6.sin6_port = htons(port);
    inet_pton(AF_INET6, text, &a->v6.sin6_addr);
    return sizeof(a->v6);
}

static const void *addr_bytes(const union addr *a)
{
    return a->sa.sa_family == AF_INET ? (const void *)&a->v4.sin_addr
                                      : (const void *)&a->v6.sin6_addr;
}

/* A UDP socket of family bound to host, port 0 (pktinfo: on), with a 1 s timeout. */
static int server_socket(int family, const char *host, int pktinfo, uint16_t *port)
{
    int fd = socket(family, SOCK_DGRAM, 0), on = 1;
    struct timeval second = {.tv_sec = 1};
    union addr a;
    socklen_t len = addr_make(&a, family, host, 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &second, sizeof(second));
    if (family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
    if (pktinfo && family == AF_INET)
        setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof(on));
    if (pktinfo && family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof(on));
    if (bind(fd, &a.sa, len) < 0) {
        close(fd);
        return -1;
    }
    len = sizeof(a);
    getsockname(fd, &a.sa, &len);
    *port = ntohs(family == AF_INET ? a.v4.sin_port : a.v6.sin6_port);
    return fd;
}

/* Asks `count` of `asked` through io (an echo server), then checks each reply: its
 * payload names the address asked, and it comes from that address. wildcard: the
 * backend must have reported each destination. */
static void exchange(int family, struct sp_io *io, uint16_t port, const char **asked,
                     unsigned count, int wildcard)
{
    int client = socket(family, SOCK_DGRAM, 0);
    struct timeval second = {.tv_sec = 1};
    setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &second, sizeof(second));
    union addr to[4];
    for (unsigned i = 0; i < count; i++) {
        socklen_t len = addr_make(&to[i], family, asked[i], port);
        sendto(client, asked[i], strlen(asked[i]), 0, &to[i].sa, len);
    }
    struct sp_frame rx[8], tx[8];
    unsigned got = 0;
    for (int tries = 0; got < count && tries < 10; tries++)
        got += io->ops->rx_burst(io, rx + got, count - got);
    CHECK_EQ(got, count);
    unsigned n = io->ops->tx_reserve(io, tx, got);
    CHECK_EQ(n, got);
    for (unsigned i = 0; i < n; i++) {
        unsigned which = count;       /* the address this datagram was sent to, by payload */
        for (unsigned k = 0; k < count; k++)
            if (rx[i].len == strlen(asked[k]) && !memcmp(rx[i].data, asked[k], rx[i].len))
                which = k;
        CHECK(which < count);
        if (wildcard && which < count) {
            CHECK(rx[i].dst != NULL);
            CHECK(rx[i].dst && !memcmp(rx[i].dst, addr_bytes(&to[which]),
                                       family == AF_INET ? 4 : 16));
        } else {
            CHECK(rx[i].dst == NULL);
        }
        memcpy(tx[i].data, rx[i].data, rx[i].len);
        tx[i].len = rx[i].len;
        tx[i].id = rx[i].id;
    }
    io->ops->tx_submit(io, tx, n, NULL, 0);
    CHECK_EQ(io->counters.tx_errors, 0);
    for (unsigned i = 0; i < count; i++) {
        char buf[64];
        union addr from;
        socklen_t len = sizeof(from);
        ssize_t r = recvfrom(client, buf, sizeof(buf) - 1, 0, &from.sa, &len);
        CHECK(r > 0);
        if (r <= 0)
            continue;
        buf[r] = 0;
        union addr expected;
        addr_make(&expected, family, buf, port);     /* the reply names the address asked */
        CHECK(!memcmp(addr_bytes(&from), addr_bytes(&expected), family == AF_INET ? 4 : 16));
    }
    close(client);
}

static void test_family(int family, const char *any, const char *bound, const char **asked,
                        unsigned count)
{
    uint16_t port;
    int fd = server_socket(family, any, 1, &port);
    if (fd < 0) {
        printf("test_socket: no %s here, skipped\n", any);
        return;
    }
    struct sp_io *io = sp_sock_io_open(fd, 8, 512);
    CHECK(io != NULL);
    exchange(family, io, port, asked, count, 1);
    io->ops->close(io);

    fd = server_socket(family, bound, 0, &port);     /* one address: no control data */
    io = sp_sock_io_open(fd, 8, 512);
    exchange(family, io, port, &bound, 1, 0);
    io->ops->close(io);
}

int main(void)
{
    const char *v4[] = {"127.0.0.1", "127.0.0.2", "127.0.0.3"};
    const char *v6[] = {"::1"};
    test_family(AF_INET, "0.0.0.0", "127.0.0.1", v4, 3);
    test_family(AF_INET6, "::", "::1", v6, 1);
    return check_report("test_socket");
}
