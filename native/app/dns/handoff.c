/* NOTIFY and transfers handed up to the server process. See handoff.h. */
#include "stormpy/app/dns/handoff.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

static bool send_up(int fd, const struct sp_dns_handoff *h, const uint8_t *data, size_t len,
                    int conn_fd)
{
    struct iovec iov[2] = {{(void *)h, sizeof(*h)}, {(void *)data, len}};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    if (conn_fd >= 0) {
        memset(&control, 0, sizeof(control));
        m.msg_control = control.buf;
        m.msg_controllen = sizeof(control.buf);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &conn_fd, sizeof(int));
    }
    ssize_t n;
    do
        n = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n >= 0;
}

bool sp_dns_handoff_datagram(int fd, uint8_t family, const uint8_t *addr, uint16_t port,
                             const uint8_t *local, const uint8_t *msg, size_t len)
{
    struct sp_dns_handoff h = {.kind = SP_DNS_HANDOFF_UDP, .family = family, .port = port};
    memcpy(h.addr, addr, family == 4 ? 4 : 16);
    if (local)
        memcpy(h.local, local, family == 4 ? 4 : 16);
    return send_up(fd, &h, msg, len, -1);
}

bool sp_dns_handoff_stream(int fd, int conn_fd, const uint8_t *data, size_t len)
{
    struct sp_dns_handoff h = {.kind = SP_DNS_HANDOFF_TCP};
    return send_up(fd, &h, data, len, conn_fd);
}
