/*
 * AF_XDP smoke test: serve a tiny hand-built zone from a real interface for a few
 * seconds, one frame worker per queue, then detach and print the counters.
 *
 *   xdp_smoke -i veth0 [-q all|0,1] [-p 53] [-t 10] [-a auto|native|generic]
 *             [-c auto|copy|zerocopy] [-b] [-o steer.bpf.o]
 *
 * The zone: www.example.com A 192.0.2.1 and AAAA 2001:db8::1 (TTL 60); any other
 * name under example.com is NXDOMAIN; everything else is REFUSED.
 * "serving ..." on stdout means the queues are open; SIGINT/SIGTERM stop early.
 * Exit status 0 when it served and detached cleanly, 1 on an error, 2 on usage.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stormpy/app/dns/dns.h"
#include "stormpy/engine/table.h"
#include "stormpy/engine/worker.h"
#include "stormpy/io/xdp_socket.h"

#define WWW "\x03www\x07" "example\x03" "com"
#define MAX_QUEUES 64

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static struct sp_table *smoke_table(void)
{
    static const struct sp_patch patches[] = {
        {.op = SP_PATCH_INSERT, .field = SP_DNS_FIELD_QUESTION, .dst = 12},
        {.op = SP_PATCH_COPY, .field = SP_DNS_FIELD_MESSAGE, .dst = 0, .src = 0, .len = 2},
        {.op = SP_PATCH_COPY_BITS, .field = SP_DNS_FIELD_MESSAGE, .dst = 2, .src = 2, .mask = 0x01},
        {.op = SP_PATCH_COPY_BITS, .field = SP_DNS_FIELD_MESSAGE, .dst = 3, .src = 3, .mask = 0x10},
    };
    /* header (QR AA, one question, one answer) + answer with the name as 0xC00C */
    static const uint8_t a[] = {0, 0, 0x84, 0x00, 0, 1, 0, 1, 0, 0, 0, 0,
                                0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1};
    static const uint8_t aaaa[] = {0, 0, 0x84, 0x00, 0, 1, 0, 1, 0, 0, 0, 0,
                                   0xc0, 0x0c, 0, 28, 0, 1, 0, 0, 0, 60, 0, 16,
                                   0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    static const uint8_t nxdomain[] = {0, 0, 0x84, 0x03, 0, 1, 0, 0, 0, 0, 0, 0};
    static const uint8_t nodata[] = {0, 0, 0x84, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    struct sp_table_builder *b = sp_table_builder_new();
    if (!b)
        return NULL;
    int ok = sp_table_add_response(b, a, sizeof(a), patches, 4, SP_RCODE_NOERROR) == 0 &&
             sp_table_add_response(b, aaaa, sizeof(aaaa), patches, 4, SP_RCODE_NOERROR) == 1 &&
             sp_table_add_response(b, nxdomain, sizeof(nxdomain), patches, 4, SP_RCODE_NXDOMAIN) == 2 &&
             sp_table_add_response(b, nodata, sizeof(nodata), patches, 4, SP_RCODE_NOERROR) == 3;
    ok = ok && sp_table_add_key(b, sp_dns_tag(SP_DNS_EXACT, 1, 1), (const uint8_t *)WWW, 17, 0) == 0;
    ok = ok && sp_table_add_key(b, sp_dns_tag(SP_DNS_EXACT, 1, 28), (const uint8_t *)WWW, 17, 1) == 0;
    ok = ok && sp_table_add_key(b, sp_dns_tag(SP_DNS_OTHER, 1, 0), (const uint8_t *)WWW, 17, 3) == 0;
    ok = ok && sp_table_add_key(b, sp_dns_tag(SP_DNS_BELOW_OTHER, 1, 0),
                                (const uint8_t *)"\x07" "example\x03" "com", 13, 2) == 0;
    if (!ok) {
        sp_table_builder_free(b);
        return NULL;
    }
    return sp_table_builder_finish(b);
}

static void *run_worker(void *arg)
{
    sp_frame_worker_run(arg);
    return NULL;
}

static int parse_queues(const char *s, unsigned *q, unsigned max)
{
    unsigned n = 0;
    while (*s) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s || n == max || v >= MAX_QUEUES)
            return -1;
        q[n++] = (unsigned)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return (int)n;
}

static void usage(void)
{
    fprintf(stderr, "usage: xdp_smoke -i IFACE [-q all|0,1] [-p PORT] [-t SECONDS] "
                    "[-a auto|native|generic] [-c auto|copy|zerocopy] [-b] [-o steer.bpf.o]\n");
}

int main(int argc, char **argv)
{
    const char *ifname = NULL, *queues_arg = "all", *obj = NULL;
    unsigned port = 53, seconds = 10;
    enum sp_xdp_attach_mode amode = SP_XDP_ATTACH_AUTO;
    struct sp_xdp_config cfg = {0};

    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-b")) {
            cfg.poll = SP_XDP_POLL_SPIN;
            continue;
        }
        if (!v) {
            usage();
            return 2;
        }
        i++;
        if (!strcmp(o, "-i"))
            ifname = v;
        else if (!strcmp(o, "-q"))
            queues_arg = v;
        else if (!strcmp(o, "-p"))
            port = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(o, "-t"))
            seconds = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(o, "-o"))
            obj = v;
        else if (!strcmp(o, "-a") && !strcmp(v, "auto"))
            amode = SP_XDP_ATTACH_AUTO;
        else if (!strcmp(o, "-a") && !strcmp(v, "native"))
            amode = SP_XDP_ATTACH_NATIVE;
        else if (!strcmp(o, "-a") && !strcmp(v, "generic"))
            amode = SP_XDP_ATTACH_GENERIC;
        else if (!strcmp(o, "-c") && !strcmp(v, "auto"))
            cfg.copy_mode = SP_XDP_COPY_AUTO;
        else if (!strcmp(o, "-c") && !strcmp(v, "copy"))
            cfg.copy_mode = SP_XDP_COPY_ALWAYS;
        else if (!strcmp(o, "-c") && !strcmp(v, "zerocopy"))
            cfg.copy_mode = SP_XDP_ZEROCOPY;
        else {
            usage();
            return 2;
        }
    }
    if (!ifname || port == 0 || port > 65535 || seconds == 0 || seconds > 3600) {
        usage();
        return 2;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    char err[256];
    struct sp_xdp_prog *prog = sp_xdp_prog_attach_file(obj, ifname, (uint16_t)port, false, SP_XDP_STEER, amode,
                                                       err, sizeof(err));
    if (!prog) {
        fprintf(stderr, "xdp_smoke: %s\n", err);
        return 1;
    }

    unsigned q[MAX_QUEUES];
    int nq;
    if (!strcmp(queues_arg, "all")) {
        nq = (int)sp_xdp_prog_queues(prog);
        if (nq <= 0)
            nq = 1;
        if (nq > MAX_QUEUES)
            nq = MAX_QUEUES;
        for (int i = 0; i < nq; i++)
            q[i] = (unsigned)i;
    } else {
        nq = parse_queues(queues_arg, q, MAX_QUEUES);
    }
    if (nq <= 0) {
        sp_xdp_prog_detach(prog);
        usage();
        return 2;
    }

    static struct sp_table_ref ref;
    static struct sp_frame_worker w[MAX_QUEUES];
    pthread_t th[MAX_QUEUES];
    struct sp_table *t = smoke_table();
    int status = 0, started = 0;
    if (!t) {
        fprintf(stderr, "xdp_smoke: cannot build the table\n");
        sp_xdp_prog_detach(prog);
        return 1;
    }
    sp_table_ref_init(&ref, t);
    sp_table_ref_set_workers(&ref, nq);

    for (int i = 0; i < nq; i++) {
        struct sp_frame_worker_config wc = {
            .io = sp_xdp_io_open(prog, q[i], &cfg, err, sizeof(err)), .ref = &ref, .index = i,
            .batch = 64, .port = (uint16_t)port, .ttl = 64, .app = SP_APP_DNS,
            .dns = {.max_udp = 1232},
        };
        if (!wc.io || sp_frame_worker_init(&w[i], &wc, err, sizeof(err)) != 0) {
            fprintf(stderr, "xdp_smoke: %s\n", err);
            status = 1;
            break;
        }
    }
    if (status == 0) {
        struct sp_xdp_stats st;
        sp_xdp_io_stats(w[0].io, &st);
        printf("serving %s queues", ifname);
        for (int i = 0; i < nq; i++)
            printf("%s%u", i ? "," : " ", q[i]);
        printf(" port %u for %u s: %s mode, %s, %s, %s\n", port, seconds,
               sp_xdp_prog_mode(prog) == SP_XDP_ATTACH_NATIVE ? "native" : "generic",
               sp_xdp_prog_uses_link(prog) ? "bpf link" : "netlink",
               st.zerocopy ? "zero-copy" : "copy", cfg.poll ? "busy poll" : "poll()");
        fflush(stdout);
        for (; started < nq; started++) {
            if (pthread_create(&th[started], NULL, run_worker, &w[started])) {
                fprintf(stderr, "xdp_smoke: cannot start a worker thread\n");
                status = 1;
                break;
            }
        }
        struct timespec tick = {0, 100 * 1000 * 1000};
        for (unsigned ms = 0; status == 0 && !stop_requested && ms < seconds * 1000; ms += 100)
            nanosleep(&tick, NULL);
        for (int i = 0; i < started; i++)
            __atomic_store_n(&w[i].stop, 1, __ATOMIC_RELEASE);
        for (int i = 0; i < started; i++)
            pthread_join(th[i], NULL);
    }

    for (int i = 0; i < nq && w[i].io; i++) {
        const struct sp_io_counters *c = &w[i].io->counters;
        const struct sp_frame_counters *f = &w[i].counters;
        const struct sp_dns_counters *dns = &w[i].dns.counters;
        struct sp_xdp_stats st;
        int kst = sp_xdp_io_stats(w[i].io, &st);
        printf("queue %u: rx %llu tx %llu (%llu bytes) tx_ring_full %llu kicks %llu batches %llu\n",
               q[i], (unsigned long long)c->rx_frames, (unsigned long long)c->tx_frames,
               (unsigned long long)c->tx_bytes, (unsigned long long)c->tx_ring_full,
               (unsigned long long)c->kicks, (unsigned long long)w[i].batches);
        printf("queue %u: frames %llu not_ours %llu bad_source %llu malformed %llu queries %llu "
               "noerror %llu nxdomain %llu refused %llu dropped %llu\n",
               q[i], (unsigned long long)f->frames, (unsigned long long)f->not_ours,
               (unsigned long long)f->bad_source, (unsigned long long)f->malformed,
               (unsigned long long)sp_dns_queries(dns), (unsigned long long)dns->rcode[0],
               (unsigned long long)dns->rcode[3], (unsigned long long)dns->rcode[5],
               (unsigned long long)dns->dropped);
        printf("queue %u: bad_desc %llu rx_wakeups %llu kick_errors %llu", q[i],
               (unsigned long long)st.bad_desc, (unsigned long long)st.rx_wakeups,
               (unsigned long long)st.tx_kick_errors);
        if (kst == 0)
            printf(" | kernel: rx_dropped %llu rx_invalid %llu tx_invalid %llu rx_ring_full %llu "
                   "fill_empty %llu tx_empty %llu",
                   (unsigned long long)st.rx_dropped, (unsigned long long)st.rx_invalid_descs,
                   (unsigned long long)st.tx_invalid_descs, (unsigned long long)st.rx_ring_full,
                   (unsigned long long)st.rx_fill_ring_empty_descs,
                   (unsigned long long)st.tx_ring_empty_descs);
        printf("\n");
        sp_frame_worker_close(&w[i]);
    }
    sp_xdp_prog_detach(prog);
    sp_table_free(t);
    printf("detached from %s\n", ifname);
    return status;
}
