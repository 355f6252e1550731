/* The custom responder's batch loop. See worker.h. */
#include "stormpy/app/rules/worker.h"

void sp_rules_worker_init(struct sp_rules_worker *w, bool all)
{
    w->all = all;
}

void sp_rules_worker_batch(struct sp_rules_worker *w, struct sp_dns_worker *d,
                           const struct sp_table *t, struct sp_batch *b)
{
    unsigned used = 0, k = 0, n = b->n;
    bool datagrams = b->datagrams;
    const struct sp_rules *rules = sp_rules_of(t);
    struct sp_responder_counters *rc = &w->counters;
    struct sp_frame *rx = b->rx, *tx = b->tx;
    struct sp_slow_packet *slow = b->slow;
    for (unsigned i = 0; i < n; i++) {
        if (sp_batch_full(b, i, used + k))   /* a frame for the slow path keeps a buffer */
            break;
        bool to_slow, replied;
        if (datagrams && sp_datagram_source_refused(rx[i].src_family, rx[i].src, rx[i].src_port)) {
            b->counters->frames++;
            b->counters->bad_source++;       /* no reply can go there, nor a handler's */
            continue;
        }
        size_t len = datagrams
            ? sp_responder_datagram(t, rules, rx[i].data, rx[i].len, tx[used].data,
                                    tx[used].cap, d, b->counters, rc, &to_slow, &replied)
            : sp_responder_frame(t, rules, b->cfg, w->all, &rx[i],
                                 tx[used].data, tx[used].cap, d, b->counters, rc, &slow[k],
                                 &to_slow);
        if (datagrams ? replied : len != 0) {
            tx[used].len = (uint32_t)len;
            if (datagrams)
                tx[used].id = rx[i].id;      /* the reply goes to this request's peer */
            used++;
        } else if (to_slow) {
            if (!b->slow_path) {
                rc->unanswered++;
                continue;
            }
            slow[k].frame = &rx[i];
            slow[k].dport = b->cfg->port;
            if (datagrams)
                slow[k].udp = 1;      /* the frame path set it; a datagram is UDP */
            k++;
        }
    }
    rc->slow_path += k;
    b->nslow = k;
    b->sent = b->used = used;
}
