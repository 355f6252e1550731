/*
 * The connection pool of a stream server on the kernel's TCP (app/http/stream.c,
 * app/dns/stream.c): an epoll set holding one listening socket, and a fixed array of
 * connections allocated and written at open, so an attack that fills it does not grow
 * the process. Each application's connection struct begins with a struct sp_conn.
 *
 *   sp_conn_pool_open(&pool, listen_fd, max, sizeof(struct conn), err, sizeof(err));
 *   c = (struct conn *)sp_conn_take(&pool);    a free one, or NULL
 *   sp_conn_add(&pool, &c->base, fd, EPOLLIN) ... sp_conn_release(&pool, &c->base, timers);
 *   sp_conn_pool_close(&pool);
 *
 * epoll events carry the connection's address; the listening socket's carry NULL.
 */
#ifndef STORMPY_ENGINE_CONN_POOL_H
#define STORMPY_ENGINE_CONN_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "stormpy/engine/timers.h"

struct sp_conn {
    struct sp_timed timed;           /* first; its next links the free connections */
    int fd;                          /* -1: free */
    uint32_t events;                 /* epoll interest */
};

struct sp_conn_pool {
    int listen_fd, epoll_fd;
    uint32_t count;                  /* connections in the array */
    size_t size;                     /* bytes of one (the application's struct) */
    uint8_t *conns;
    struct sp_timed *free_list;
};

/* Takes listen_fd; max is capped by the process's file limit. 0, or -1 with a one-line
 * reason in err and listen_fd closed. */
int sp_conn_pool_open(struct sp_conn_pool *p, int listen_fd, uint32_t max, size_t size,
                      char *err, size_t errlen);
/* Closes every connection, the listening socket and the epoll set. */
void sp_conn_pool_close(struct sp_conn_pool *p);

/* A stream server's state: `size` zeroed bytes whose first member is a struct
 * sp_conn_pool, opened as above (max 0: 1024). NULL with a one-line reason in err and
 * listen_fd closed. The server closes the pool and frees the state. */
void *sp_conn_server_new(size_t size, int listen_fd, uint32_t max, size_t conn_size, char *err,
                         size_t errlen);

static inline struct sp_conn *sp_conn_at(const struct sp_conn_pool *p, uint32_t i)
{
    return (struct sp_conn *)(p->conns + (size_t)i * p->size);
}

/* A free connection, or NULL. */
struct sp_conn *sp_conn_take(struct sp_conn_pool *p);
/* c (taken) on fd, in the epoll set for events: 0, or -1 (fd closed, c free again). */
int sp_conn_add(struct sp_conn_pool *p, struct sp_conn *c, int fd, uint32_t events);
/* Closes c's socket, takes it off its timer list, and frees it. */
void sp_conn_release(struct sp_conn_pool *p, struct sp_conn *c, struct sp_timer_list *timers);
/* Changes c's epoll interest (nothing when it is the same). */
void sp_conn_set_events(struct sp_conn_pool *p, struct sp_conn *c, uint32_t events);

#endif
