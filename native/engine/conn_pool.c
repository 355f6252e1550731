/* A stream server's connections. See stormpy/engine/conn_pool.h. */
#include "stormpy/engine/conn_pool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

int sp_conn_pool_open(struct sp_conn_pool *p, int listen_fd, uint32_t max, size_t size,
                      char *err, size_t errlen)
{
    memset(p, 0, sizeof(*p));
    p->listen_fd = listen_fd;
    p->epoll_fd = -1;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)max + 64)
        max = rl.rlim_cur > 128 ? (uint32_t)rl.rlim_cur - 64 : 64;
    p->conns = calloc(max, size);
    if (!p->conns) {
        snprintf(err, errlen, "out of memory for %u connections", max);
        goto fail;
    }
    p->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (p->epoll_fd < 0) {
        snprintf(err, errlen, "epoll_create1: %s", strerror(errno));
        goto fail;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(p->epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev) != 0) {
        snprintf(err, errlen, "epoll_ctl on the listening socket: %s", strerror(errno));
        goto fail;
    }
    p->count = max;
    p->size = size;
    /* every connection is written now: the pool's memory is the process's from the
     * start, and filling it takes no more */
    for (uint32_t i = max; i-- > 0;) {
        struct sp_conn *c = sp_conn_at(p, i);
        c->fd = -1;
        c->timed.list = SP_TIMER_NONE;
        c->timed.next = p->free_list;
        p->free_list = &c->timed;
    }
    return 0;
fail:
    if (p->epoll_fd >= 0)
        close(p->epoll_fd);
    free(p->conns);
    close(listen_fd);
    memset(p, 0, sizeof(*p));
    return -1;
}

void *sp_conn_server_new(size_t size, int listen_fd, uint32_t max, size_t conn_size, char *err,
                         size_t errlen)
{
    struct sp_conn_pool *p = calloc(1, size);
    if (!p) {
        snprintf(err, errlen, "out of memory for a stream server");
        close(listen_fd);
        return NULL;
    }
    if (sp_conn_pool_open(p, listen_fd, max ? max : 1024, conn_size, err, errlen) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

void sp_conn_pool_close(struct sp_conn_pool *p)
{
    if (!p->conns)
        return;
    for (uint32_t i = 0; i < p->count; i++)
        if (sp_conn_at(p, i)->fd >= 0)
            close(sp_conn_at(p, i)->fd);
    close(p->epoll_fd);
    close(p->listen_fd);
    free(p->conns);
    memset(p, 0, sizeof(*p));
}

struct sp_conn *sp_conn_take(struct sp_conn_pool *p)
{
    struct sp_timed *t = p->free_list;
    if (!t)
        return NULL;
    p->free_list = t->next;
    t->next = NULL;
    return (struct sp_conn *)t;
}

int sp_conn_add(struct sp_conn_pool *p, struct sp_conn *c, int fd, uint32_t events)
{
    c->fd = fd;
    c->events = events;
    c->timed.list = SP_TIMER_NONE;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(p->epoll_fd, EPOLL_CTL_ADD, fd, &ev) == 0)
        return 0;
    sp_conn_release(p, c, NULL);
    return -1;
}

void sp_conn_release(struct sp_conn_pool *p, struct sp_conn *c, struct sp_timer_list *timers)
{
    if (timers)
        sp_timer_remove(timers, &c->timed);
    close(c->fd);                        /* also takes it out of the epoll set */
    c->fd = -1;
    c->timed.next = p->free_list;
    p->free_list = &c->timed;
}

void sp_conn_set_events(struct sp_conn_pool *p, struct sp_conn *c, uint32_t events)
{
    if (events == c->events)
        return;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    epoll_ctl(p->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
    c->events = events;
}
