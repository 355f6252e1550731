/*
 * Inside serve-http's own TCP (ring.h), shared by ring.c (connections, handshake,
 * receiving, requests) and ring_send.c (the sender: segments, the ACK clock,
 * congestion control and loss recovery). Not an API.
 */
#ifndef STORMPY_APP_HTTP_RING_INTERNAL_H
#define STORMPY_APP_HTTP_RING_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "stormpy/app/dns/precopy.h"
#include "stormpy/app/http/reply.h"
#include "stormpy/app/http/ring.h"
#include "stormpy/engine/wheel.h"
#include "stormpy/proto/eth.h"
#include "stormpy/proto/tcpip.h"

#define IN_CAP (SP_HTTP_HEAD_MAX + 1024)
#define BUCKETS 4096
#define L2_MAX (SP_ETH_HEADER_LEN + 2 * SP_VLAN_TAG_LEN)
#define INIT_CWND_SEGMENTS 10
#define RTO_INITIAL_MS 1000
#define RTO_MIN_MS 200
#define RTO_MAX_MS 60000
#define RETRIES_MAX 10
#define WINDOW_MAX 65535

#define SYNACK_RETRIES 5               /* as Linux's tcp_synack_retries */
#define TIME_WAIT_MS 60000              /* 2 MSL, as Linux */

enum state { FREE = 0, SYN_RCVD, ESTABLISHED, TIME_WAIT };

#define SEQ_LT(a, b) ((int32_t)((a) - (b)) < 0)
#define SEQ_LEQ(a, b) ((int32_t)((a) - (b)) <= 0)

/* What a SACKing peer holds above snd_una (RFC 2018): ranges [left, right), sorted,
 * disjoint and not touching. Bounded: a range that does not fit is forgotten. */
#define SACK_RANGES 6
struct sack_board {
    uint8_t n;
    uint32_t edge[SACK_RANGES][2];
};

struct tcb {
    struct tcb *hnext;                   /* hash chain */
    struct tcb *next;                    /* free list */
    struct tcb *ready_next, **ready_pprev;   /* to run this round (ready_pprev set) */
    struct tcb *tw_next, **tw_pprev;     /* in TIME_WAIT, oldest first */
    struct sp_wheel_timer timer;         /* its earliest deadline */
    uint64_t ready_round;
    uint64_t tw_until_ns;
    uint8_t state;
    bool peer_fin, fin_queued, recovery, rtt_timing, has_reply, ack_owed;
    bool closed_first;                   /* our FIN went before the peer's came: TIME_WAIT */
    bool sack_ok;                        /* both offered SACK: RFC 6675 recovery */
    uint8_t l2_len, wscale, dupacks, retries;
    struct sp_precopy *pool;             /* precopy mode: segments kept ready to send */
    uint16_t mss;
    struct sp_tcpip peer;                /* the client's addresses and ports, as it sends */
    uint8_t l2[L2_MAX];                  /* the link header of frames to the client */
    uint32_t iss, snd_una, snd_nxt, snd_max, snd_wnd, cwnd, ssthresh;
    uint32_t recover;                    /* snd_max when recovery or the timer began */
    uint32_t rcv_nxt;
    uint32_t high_rxt;                   /* RFC 6675 HighRxt: holes retransmitted below it */
    uint32_t lost_to;                    /* the probe timer found the holes below lost */
    struct sack_board sack;
    uint32_t reply_seq;                  /* the sequence number of the answer's first byte */
    uint32_t fin_seq;
    uint32_t rtt_seq;
    uint64_t rtt_start_ns, rto_at_ns, last_ns, request_since_ns;
    uint64_t clock_ns;                   /* now, for the timers this batch starts */
    uint64_t probe_at_ns;                /* tail loss probe, when the ACKs stop coming */
    uint32_t srtt_us, rttvar_us, rto_ms;
    uint64_t gen;                        /* the answer's table generation, pinned */
    uint64_t discard;
    struct sp_http_reply reply;
    uint32_t in_len;
    uint8_t in[IN_CAP];
};

struct sp_http_ring {
    struct sp_http_ring_config cfg;
    struct tcb *tcbs, *free_list;
    struct tcb *ready, **ready_tail;     /* FIFO */
    struct tcb *tw, **tw_tail;           /* FIFO */
    uint64_t round;                      /* batches run */
    struct sp_wheel wheel;
    struct sp_precopy *pool;             /* precopy mode's, the worker's (not ours) */
    struct tcb *bucket[BUCKETS];
    uint64_t secret;
    uint32_t half_open;                  /* connections in SYN_RCVD */
    uint64_t cookie_sent_ns;             /* the last SYN cookie, 0: none yet */
    int64_t date_second;
    struct sp_http_date date;            /* the current second's, with its sum */
    struct sp_http_request req;          /* scratch */
};

/* ring_conn.c: the connection table. */
uint64_t ring_mix(uint64_t x);
uint32_t ring_flow_hash(const struct sp_tcpip *t);
struct tcb *ring_find(struct sp_http_ring *r, const struct sp_tcpip *t);
/* Whether a connection can be had (free, or one in TIME_WAIT to take). */
bool ring_has_room(const struct sp_http_ring *r);
/* A connection for the flow of t, zeroed up to its reply and hashed; the oldest in
 * TIME_WAIT goes when none is free. NULL when every one is in use. */
struct tcb *ring_take(struct sp_http_ring *r, const struct sp_tcpip *t, struct sp_table_pins *pins,
                      struct sp_http_counters *k);
void ring_release(struct sp_http_ring *r, struct tcb *c, struct sp_table_pins *pins,
                  struct sp_http_counters *k);
/* To be run this round (or, added while the round runs, the next). */
void ring_ready(struct sp_http_ring *r, struct tcb *c);
void ring_unready(struct sp_http_ring *r, struct tcb *c);
/* Into TIME_WAIT until until_ns: the answer unpinned, the connection kept to
 * acknowledge a repeated FIN. */
void ring_time_wait(struct sp_http_ring *r, struct tcb *c, struct sp_table_pins *pins,
                    uint64_t until_ns);

/* Whether the batch has room for no more segments: every TX buffer taken (used of
 * them), or every gathered frame. */
static inline bool ring_tx_full(const struct sp_batch *b, unsigned used)
{
    return used >= b->reserved || (b->gather && b->ngather >= b->gather_cap);
}

/* The segment at seq, flags, len payload bytes from the answer (and a SYN's options)
 * as the batch's next frame (*sent of them so far); false when the batch is full.
 * Where the backend segments (b->gather), payload goes as one gathered frame of
 * segments of c->mss bytes, pointing into the answer. In precopy mode (b->out is not
 * b->tx) a segment of body bytes goes from a copy in the pool when there is one,
 * with only its headers written. */
bool ring_emit(const struct tcb *c, struct sp_batch *b, unsigned *sent, uint32_t seq, uint8_t flags,
               uint32_t len, uint32_t window, const struct sp_tcp_options *syn);
/* The batch's next TX buffer (check *sent < b->reserved first), and the frame written
 * into it, len bytes, taken as the batch's next. */
struct sp_frame *ring_tx_next(struct sp_batch *b, unsigned sent);
void ring_tx_commit(struct sp_batch *b, unsigned *sent, uint32_t len);
/* The window to advertise: the request buffer's room. */
uint32_t ring_rcv_window(const struct tcb *c);
/* One segment at seq, at most limit bytes (with b->gather, as many whole segments
 * as fit in limit and in one gathered frame); false when there is no TX buffer or
 * nothing to send there. */
bool ring_send_at(struct tcb *c, struct sp_batch *b, unsigned *used, uint32_t seq,
                  uint32_t limit, struct sp_http_counters *k);
/* New data and the FIN, within min(cwnd, the peer's window); true when any went. */
bool ring_send_more(struct tcb *c, struct sp_batch *b, unsigned *used, struct sp_http_counters *k);
/* An ACK; false when the batch had no room for it. */
bool ring_send_ack(struct tcb *c, struct sp_batch *b, unsigned *used);
/* An ACK that arrived on an established connection. */
void ring_on_ack(struct tcb *c, const struct sp_tcpip *t, struct sp_batch *b, unsigned *used,
                 struct sp_http_counters *k);
/* The tail loss probe's timer, from now. */
void ring_arm_probe(struct tcb *c);
/* The retransmission timer went off; false when the connection has tried enough. */
bool ring_on_timeout(struct tcb *c, struct sp_http_counters *k);

/* ring_sack.c. The SACK blocks of an ACK whose cumulative ACK is una, into the board;
 * blocks outside (una, max] are ignored. */
void sack_update(struct sack_board *s, uint32_t una, uint32_t max, const struct sp_tcp_options *o);
/* Every un-SACKed byte below this is lost (RFC 6675 IsLost()); una when none is. */
uint32_t sack_lost_edge(const struct sack_board *s, uint32_t una, uint32_t mss);
/* Bytes in [a, b) that no range covers. */
uint32_t sack_unsacked(const struct sack_board *s, uint32_t a, uint32_t b);
/* RFC 6675 SetPipe(): the bytes believed in the network. */
uint32_t sack_pipe(const struct sack_board *s, uint32_t una, uint32_t max, uint32_t high_rxt,
                   uint32_t lost);
/* The lowest un-SACKed byte in [from, limit) and how far it runs un-SACKed (up to limit);
 * false when there is none. */
bool sack_hole(const struct sack_board *s, uint32_t from, uint32_t limit, uint32_t *seq,
               uint32_t *len);
/* After an ACK has updated the board and snd_una: enters recovery when a loss shows
 * (DupThresh duplicate ACKs or IsLost(snd_una)), sending the first hole. */
void sack_on_ack(struct tcb *c, struct sp_batch *b, unsigned *used, struct sp_http_counters *k);
/* The probe timer went off with a SACKing peer: in recovery, or when the board
 * shows holes, the holes are lost (entering recovery); false when it does not apply
 * (then a tail loss probe goes). */
bool sack_on_probe(struct tcb *c, struct sp_batch *b, unsigned *used, struct sp_http_counters *k);
/* In recovery: holes, new data and unconfirmed holes while the pipe is below cwnd. */
bool sack_send(struct tcb *c, struct sp_batch *b, unsigned *used, struct sp_http_counters *k);

/* ring_cookie.c: SYN cookies. An ACK may complete a cookie's handshake this long
 * after the last cookie went (its slot and the next). */
#define COOKIE_VALID_NS (128ull * 1000000000ull)
/* What a valid cookie says about the connection. What a valid cookie says about the connection. */
struct cookie_opts {
    uint16_t mss;
    uint8_t wscale;                      /* the peer's shift */
    bool has_wscale, sack;
};
/* The MAC of a cookie for the flow of t, the client's isn, the cookie's 7 data bits
 * and a time slot. */
uint32_t cookie_mac(uint64_t secret, const struct sp_tcpip *t, uint32_t isn, uint32_t data,
                    uint64_t slot);
/* The ISS answering syn, the path's MSS at most mss. */
uint32_t cookie_make(uint64_t secret, const struct sp_tcpip *syn, uint16_t mss, uint64_t now_ns);
/* True when ack->ack - 1 is a cookie this secret made for the flow and ack->seq - 1
 * within the last two time slots; then its options in out. */
bool cookie_check(uint64_t secret, const struct sp_tcpip *ack, uint64_t now_ns,
                  struct cookie_opts *out);

#endif
