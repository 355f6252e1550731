# C declarations of the native core (native/include/stormpy/*.h).
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int64_t

cdef extern from "stormpy/proto/csum.h" nogil:
    uint32_t sp_csum_partial(const void *data, size_t len, uint32_t sum)
    size_t sp_csum_prefix(const void *data, size_t len, size_t stride, uint16_t *out)
    uint16_t sp_csum_fold(uint32_t sum)

cdef extern from "stormpy/engine/table.h" nogil:
    enum:
        SP_FIELDS
        SP_PATCH_COPY
        SP_PATCH_COPY_BITS
        SP_PATCH_INSERT
        SP_PATCH_SHIFT
    struct sp_patch:
        uint8_t op
        uint8_t field
        uint8_t mask
        uint8_t pad
        uint16_t dst
        uint16_t src
        uint16_t len
    struct sp_request:
        const uint8_t *field[4]
        uint16_t field_len[4]
    struct sp_response:
        uint32_t len
        uint32_t user
    struct sp_table:
        pass
    struct sp_table_builder:
        pass
    struct sp_table_info:
        uint64_t keys, responses, patches, arena_bytes, slots, memory_bytes
        uint64_t longest_response

    sp_table_builder *sp_table_builder_new()
    void sp_table_builder_free(sp_table_builder *b)
    int64_t sp_table_add_response(sp_table_builder *b, const uint8_t *data, uint32_t len,
                                  const sp_patch *patches, uint16_t npatch, uint32_t user)
    int sp_table_add_key(sp_table_builder *b, uint64_t tag, const uint8_t *key,
                         uint32_t key_len, uint32_t response)
    sp_table *sp_table_builder_finish(sp_table_builder *b)
    sp_table_builder *sp_table_builder_edit(const sp_table *t)
    void sp_table_free(sp_table *t)
    size_t sp_table_flat_size(const sp_table *t)
    sp_table *sp_table_flatten(const sp_table *t, void *mem)
    sp_table *sp_table_flat_rebase(void *mem, size_t len)
    const sp_response *sp_table_find(const sp_table *t, uint64_t tag, const uint8_t *key,
                                     size_t key_len)
    size_t sp_response_render(const sp_table *t, const sp_response *r, const sp_request *req,
                              uint8_t *out, size_t cap)
    uint32_t sp_response_sum(const sp_table *t, const sp_response *r, const sp_request *req)
    int sp_table_set_program(sp_table_builder *b, const void *program, uint32_t len)
    void sp_table_get_info(const sp_table *t, sp_table_info *info)

cdef extern from "stormpy/engine/table_ref.h" nogil:
    enum:
        SP_MAX_WORKERS
    struct sp_table_ref:
        sp_table *current
    struct sp_table_pins:
        pass
    void sp_table_ref_init(sp_table_ref *ref, sp_table *t)
    const sp_table *sp_table_ref_enter(sp_table_ref *ref, int worker)
    void sp_table_ref_leave(sp_table_ref *ref, int worker)
    void sp_table_ref_set_workers(sp_table_ref *ref, int n)
    sp_table *sp_table_ref_swap(sp_table_ref *ref, sp_table *t)
    bint sp_table_ref_wait(sp_table_ref *ref, int timeout_ms)

cdef extern from "stormpy/app/dns/dns.h" nogil:
    enum:
        SP_DNS_EXACT
        SP_DNS_OTHER
        SP_DNS_BELOW
        SP_DNS_BELOW_OTHER
        SP_DNS_ZONE_SLOTS
        SP_DNS_USER_WILDCARD
        SP_DNS_USER_SIGNED
        SP_DNS_USER_DNAME
        SP_DNS_USER_GAPS
        SP_DNS_USER_NSEC3
        SP_DNS_GAP_ENTRY
    struct sp_dns_query:
        uint8_t opcode
        bint has_question
        bint edns
        bint edns_do
        uint8_t edns_version
        uint16_t edns_size
        uint16_t qtype
        uint16_t qclass
        uint8_t name_len
        uint16_t question_len
        uint8_t name_lower[264]
        uint8_t question[272]
    struct sp_dns_config:
        uint16_t max_udp
        uint16_t nsid_len
        uint8_t nsid[128]
        int handoff_fd
        uint8_t handoff_local[16]
    struct sp_dns_counters:
        uint64_t dropped
        uint64_t truncated
        uint64_t rcode[17]
        uint64_t zone[64]
    uint64_t sp_dns_queries(const sp_dns_counters *c)
    int sp_dns_parse(const uint8_t *msg, size_t len, sp_dns_query *q)
    size_t sp_dns_answer(const sp_table *t, const sp_dns_config *cfg, const uint8_t *msg,
                         size_t len, bint tcp, uint8_t *out, size_t cap, sp_dns_query *q,
                         sp_dns_counters *c)

cdef extern from "stormpy/proto/tcpip.h" nogil:
    struct sp_tcp_options:
        bint has_mss, has_wscale, sack_permitted, has_timestamps
        uint16_t mss
        uint8_t wscale
        uint8_t nsack
        uint32_t ts_val, ts_ecr
        uint32_t sack[4][2]
    struct sp_tcpip:
        uint8_t family
        uint16_t sport, dport
        uint32_t seq, ack
        uint8_t flags
        uint16_t window
        size_t l4_off, payload_off, payload_len
        sp_tcp_options opt
    struct sp_tcp_segment:
        uint32_t seq, ack
        uint8_t flags
        uint16_t window
        const sp_tcp_options *syn
    bint sp_tcpip_parse(const uint8_t *ip, size_t len, sp_tcpip *t)
    bint sp_tcpip_checksums_ok(const uint8_t *ip, const sp_tcpip *t)
    size_t sp_tcpip_header_len(uint8_t family, const sp_tcp_segment *seg)
    size_t sp_tcpip_write_reply(uint8_t *out, const sp_tcpip *to, const sp_tcp_segment *seg,
                                size_t payload_len, uint32_t payload_sum, uint8_t ttl)

cdef extern from "stormpy/proto/udpip.h" nogil:
    struct sp_udpip:
        uint8_t family
        uint8_t src[16]
        uint8_t dst[16]
        uint16_t sport, dport
        size_t payload_off
        size_t payload_len
    bint sp_udpip_parse(const uint8_t *ip, size_t len, sp_udpip *u)
    size_t sp_udpip_write_reply(uint8_t *out, const sp_udpip *req, size_t payload_len,
                                uint32_t payload_sum, uint8_t ttl)

cdef extern from "stormpy/engine/counters.h" nogil:
    enum:
        SP_HIST_BUCKETS

cdef extern from "stormpy/io/socket.h" nogil:
    sp_io *sp_sock_io_open(int fd, unsigned batch, uint16_t tx_max)

cdef extern from "stormpy/engine/shm.h" nogil:
    struct sp_shm:
        pass
    struct sp_shm_info:
        uint64_t size
        uint64_t used
        uint64_t blocks
        uint64_t kept
    sp_shm *sp_shm_create(size_t size)
    void sp_shm_destroy(sp_shm *s)
    void *sp_shm_alloc(sp_shm *s, size_t n)
    void *sp_shm_alloc_raw(sp_shm *s, size_t n, size_t room)
    int sp_shm_prefault(sp_shm *s, size_t n, size_t room)
    void sp_shm_keep_freed_pages(sp_shm *s, int keep)
    void sp_shm_free(sp_shm *s, void *p)
    int sp_shm_contains(const sp_shm *s, const void *p)
    void sp_shm_get_info(const sp_shm *s, sp_shm_info *info)

cdef extern from "stormpy/engine/tap.h" nogil:
    uint64_t SP_TAP_MAGIC
    uint64_t SP_TAP_HEARTBEAT_NS
    uint64_t SP_TAP_STALE_NS
    enum:
        SP_TAP_SKIP
        SP_TAP_RX
        SP_TAP_TX
    struct sp_tap_region:
        uint64_t magic
        uint32_t rings
        uint32_t snaplen
        uint64_t ring_bytes
        uint32_t attached
        uint64_t heartbeat_ns
    struct sp_tap_ring:
        uint64_t head
        uint64_t tail
        uint64_t records
        uint64_t drops
    struct sp_tap_record:
        uint32_t size
        uint32_t caplen
        uint32_t len
        uint16_t dir
        uint64_t ts_ns
    size_t sp_tap_region_size(uint32_t rings, uint64_t ring_bytes)
    sp_tap_ring *sp_tap_ring_at(sp_tap_region *r, uint32_t index)
    int sp_tap_region_init(sp_tap_region *r, uint32_t rings, uint64_t ring_bytes, uint32_t snaplen)
    uint32_t sp_tap_attach(sp_tap_region *r, uint32_t session, uint64_t now)
    void sp_tap_heartbeat(sp_tap_region *r, uint64_t now)
    uint32_t sp_tap_session(sp_tap_region *r, uint64_t now)
    void sp_tap_detach(sp_tap_region *r, uint32_t session)
    const sp_tap_record *sp_tap_peek(sp_tap_region *r, sp_tap_ring *ring)
    void sp_tap_consume(sp_tap_ring *ring, const sp_tap_record *rec)

cdef extern from "stormpy/engine/clock.h" nogil:
    uint64_t sp_now_ns()

cdef extern from "stormpy/engine/frame.h" nogil:
    struct sp_frame_config:
        uint16_t port
        uint8_t ttl
        uint16_t mtu
        int check_dst
        uint8_t nv4, nv6
        uint8_t v4[8][4]
        uint8_t v6[8][16]
        uint8_t mac[6]
        int own_stack
        int has_ipv4, has_ipv6
        uint8_t ipv4[4]
        uint8_t ipv6[16]
    struct sp_frame_counters:
        uint64_t frames
        uint64_t not_ours
        uint64_t bad_source
        uint64_t malformed
        uint64_t stack_replies
    struct sp_frame_query:
        size_t l2
        size_t headers
        sp_udpip u

cdef extern from "stormpy/app/dns/rrl.h" nogil:
    enum:
        SP_RRL_ALLOW_MAX
    struct sp_rrl_prefix:
        uint8_t family
        uint8_t len
        uint8_t addr[16]
    struct sp_rrl_config:
        uint32_t rate
        uint32_t slip
        uint8_t v4_prefix
        uint8_t v6_prefix
        uint32_t nallow
        sp_rrl_prefix allow[16]
    struct sp_rrl:
        pass
    size_t sp_rrl_size(uint64_t buckets)
    sp_rrl *sp_rrl_init(void *mem, uint64_t buckets, const sp_rrl_config *cfg)

cdef extern from "stormpy/io.h" nogil:
    struct sp_io_counters:
        uint64_t rx_frames
        uint64_t tx_frames
        uint64_t tx_bytes
        uint64_t tx_ring_full
        uint64_t kicks
        uint64_t rx_truncated
        uint64_t tx_errors
        uint64_t tx_gathered
        uint64_t tx_held
        uint64_t tx_inflight_peak
    enum:
        SP_IO_BATCH_MAX
    struct sp_frame:
        uint8_t *data
        uint32_t len
        uint32_t cap
        uint64_t id
        const uint8_t *src
        uint8_t src_family
        uint16_t src_port
        const uint8_t *dst
    struct sp_io_ops:
        void (*close)(sp_io *io)
    struct sp_io:
        const sp_io_ops *ops
        sp_io_counters counters
        int datagrams
        int error
    sp_io *sp_mem_io_open(const uint8_t *frames, size_t len, uint64_t rounds, size_t capture_max)
    const uint8_t *sp_mem_io_captured(const sp_io *io, size_t *len)
    void sp_mem_io_set_l4_verified(sp_io *io, int verified)

cdef extern from "stormpy/app/dns/precopy.h" nogil:
    enum:
        SP_PRECOPY_DEFAULT_FRAMES
        SP_PRECOPY_DEFAULT_MIN_LEN
    struct sp_precopy_counters:
        uint64_t hits
        uint64_t fills
        uint64_t fallbacks
    struct sp_precopy:
        pass
    const sp_precopy_counters *sp_precopy_get_counters(const sp_precopy *p)
    void sp_precopy_set_min_len(sp_precopy *p, size_t len)

cdef extern from "stormpy/engine/batch.h" nogil:
    struct sp_slow_packet:
        const sp_frame *frame
        sp_frame_query fq
        uint16_t dport
        uint8_t udp
    ctypedef unsigned (*sp_slow_path_fn)(void *ctx, const sp_slow_packet *p, unsigned n,
                                         sp_frame *tx, unsigned ntx) noexcept

cdef extern from "stormpy/app/rules/rules.h" nogil:
    enum:
        SP_RULES_MAGIC
        SP_RULES_MAX
        SP_RULE_MATCH_MAX
        SP_RULE_STOPS
        SP_RULE_NO_RESPONSE
        SP_RULE_TO_END
        SP_RESPONSE_SLOW_PATH
    struct sp_rule:
        uint16_t min_len
        uint16_t match_off
        uint8_t match_len
        uint8_t nstops
        uint8_t keyed
        uint8_t match[32]
        uint8_t stops[4]
        uint16_t key_off, key_end
        uint16_t echo_off, echo_end
        uint32_t response
        uint64_t tag
    struct sp_rules:
        uint32_t magic
        uint16_t nrules
        uint16_t dns
        sp_rule rule[1]
    uint64_t sp_rule_tag(unsigned i)
    int sp_rules_check(const sp_table *t, char *err, size_t errlen)
    struct sp_responder_counters:
        uint64_t rule_answers
        uint64_t rule_unsent
        uint64_t unanswered
        uint64_t slow_path
        uint64_t slow_replies
        uint64_t handler_errors
        uint64_t bad_replies
    bint sp_responder_reply(const sp_frame_config *cfg, bint datagrams, const sp_slow_packet *p,
                              const uint8_t *payload, size_t len, sp_frame *tx)
    size_t sp_responder_raw(const sp_frame_config *cfg, bint datagrams, const uint8_t *frame,
                            size_t len, sp_frame *tx)

cdef extern from "stormpy/app/dns/stream.h" nogil:
    struct sp_dns_tcp_counters:
        uint64_t connections
        uint64_t open
        uint64_t refused
        uint64_t source_limited
        uint64_t evicted
        uint64_t io_timeouts
        uint64_t idle_timeouts
        uint64_t malformed
    struct sp_dns_stream_config:
        int listen_fd
        uint32_t max_connections
        uint32_t max_per_source
        uint32_t io_timeout_ms
        uint32_t idle_timeout_ms
        sp_dns_config dns

cdef extern from "stormpy/app/dns/worker.h" nogil:
    struct sp_dns_worker:
        sp_dns_config cfg
        sp_rrl *rrl
        sp_dns_counters counters
        uint64_t rrl_dropped
        uint64_t rrl_slipped
        sp_precopy *precopy
        sp_precopy_counters precopy_counters
        sp_dns_tcp_counters tcp
    struct sp_dns_worker_config:
        uint16_t max_udp
        sp_rrl *rrl
        unsigned precopy_frames

cdef extern from "stormpy/app/rules/worker.h" nogil:
    struct sp_rules_worker:
        sp_responder_counters counters
    void sp_rules_worker_init(sp_rules_worker *w, bint all)

cdef extern from "stormpy/app/http/site.h" nogil:
    enum:
        SP_HTTP_SITE_MAGIC
        SP_HTTP_DATE_LEN
        SP_HTTP_ERRORS
        SP_HTTP_SUM_STRIDE
    struct sp_http_entry:
        pass
    struct sp_http_site:
        pass
    const sp_http_site *sp_http_site_of(const sp_table *t)

cdef extern from "stormpy/app/http/request.h" nogil:
    struct sp_http_request:
        uint8_t method
        uint16_t error
    size_t sp_http_parse_request(const uint8_t *buf, size_t len, sp_http_request *req)
    int64_t sp_http_parse_date(const uint8_t *s, size_t len)
    void sp_http_format_date(int64_t t, uint8_t *out)

cdef extern from "stormpy/app/http/reply.h" nogil:
    enum:
        SP_HTTP_QUERY_MAX
    struct iovec_view "iovec":
        void *iov_base
        size_t iov_len
    struct sp_http_reply:
        iovec_view iov[5]
        int niov
        uint16_t status
        bint close
        uint64_t len
    struct sp_http_date:
        pass
    void sp_http_date_set(sp_http_date *d, int64_t second)
    void sp_http_answer(const sp_table *t, const sp_http_site *site, const sp_http_request *req,
                       const sp_http_date *date, sp_http_reply *out)
    uint32_t sp_http_reply_copy(const sp_http_reply *r, uint64_t off, size_t len, uint8_t *out)

cdef extern from "stormpy/app/http/stream.h" nogil:
    struct sp_http_counters:
        uint64_t connections
        uint64_t requests
        uint64_t status[6]
        uint64_t bytes
        uint64_t timeouts
        uint64_t evicted
        uint64_t refused
        uint64_t open
        uint64_t retransmits
        uint64_t cookies_sent
        uint64_t cookies_accepted
    struct sp_http_stream_config:
        int listen_fd
        uint32_t max_connections
        uint32_t request_timeout_ms
        uint32_t idle_timeout_ms
        uint32_t send_timeout_ms

cdef extern from "stormpy/engine/batch.h" nogil:
    struct sp_batch:
        sp_frame *rx
        unsigned n
        sp_frame *tx
        unsigned reserved
        const sp_frame_config *cfg
        sp_frame_counters *counters
        sp_frame *spare
        sp_frame *out
        unsigned sent
        unsigned used

cdef extern from "stormpy/app/http/ring.h" nogil:
    struct sp_http_ring_config:
        uint32_t max_connections
        uint32_t request_timeout_ms
        uint32_t idle_timeout_ms
        uint32_t send_timeout_ms
        bint no_gather
    struct sp_http_ring:
        pass
    sp_http_ring *sp_http_ring_open(const sp_http_ring_config *cfg)
    void sp_http_ring_close(sp_http_ring *r)
    void sp_http_ring_set_pool(sp_http_ring *r, sp_precopy *pool)
    void sp_http_ring_batch(sp_http_ring *r, const sp_table *t, uint64_t gen, sp_table_pins *pins,
                            sp_batch *b, sp_http_counters *c)

cdef extern from "stormpy/app/http/worker.h" nogil:
    struct sp_http_worker:
        sp_http_counters counters
        sp_http_ring *ring
    int sp_http_worker_init_ring(sp_http_worker *w, const sp_http_ring_config *cfg)

cdef extern from "stormpy/engine/worker.h" nogil:
    enum sp_app:
        SP_APP_DNS
        SP_APP_RULES
        SP_APP_HTTP
        SP_APP_DNS_TCP
    struct sp_frame_worker:
        sp_io *io
        sp_table_ref *ref
        int index
        unsigned batch
        uint64_t tx_flush_ns
        sp_frame_config cfg
        uint64_t batches
        uint64_t batch_hist[10]
        sp_io_counters io_counters
        sp_frame_counters counters
        int stop
        int app
        sp_slow_path_fn slow_path
        void *slow_ctx
        sp_dns_worker dns
        sp_rules_worker rules
        sp_http_worker http
        sp_tap_region *tap
    struct sp_frame_worker_config:
        sp_io *io
        sp_table_ref *ref
        int index
        unsigned batch
        uint64_t tx_flush_ns
        uint16_t port
        uint8_t ttl
        int app
        int all_frames
        sp_dns_worker_config dns
        sp_http_stream_config http
        sp_dns_stream_config dns_tcp
    int sp_frame_worker_init(sp_frame_worker *w, const sp_frame_worker_config *cfg, char *err,
                             size_t errlen)
    void sp_frame_worker_rearm(sp_frame_worker *w)
    uint64_t sp_frame_worker_run(sp_frame_worker *w)
    void sp_frame_worker_close(sp_frame_worker *w)
    void sp_frame_worker_stop(sp_frame_worker *w)

cdef extern from "stormpy/io/packet.h" nogil:
    struct sp_packet_config:
        const char *ifname
        uint16_t fanout_group
        int busy_poll
        unsigned poll_ms
        int precopy
        int promiscuous
    sp_io *sp_packet_io_open(const sp_packet_config *cfg, char *err, size_t errlen)

cdef extern from "stormpy/app/impair/impair.h" nogil:
    struct sp_impair_config:
        uint32_t loss_ppm
        uint32_t duplicate_ppm
        uint32_t reorder_ppm
        uint64_t delay_us
        uint64_t reorder_us
        uint64_t seed
        uint32_t queue_frames
    struct sp_impair_counters:
        uint64_t received, sent, lost, duplicated, reordered, overflow, oversized
    struct sp_impair:
        pass
    sp_impair *sp_impair_new(const sp_impair_config *cfg)
    void sp_impair_free(sp_impair *im)
    int sp_impair_run(sp_impair *im, sp_io *inp, sp_io *out, sp_impair_counters *c)
    void sp_impair_stop(sp_impair *im)

cdef extern from "stormpy/io/netmap.h" nogil:
    struct sp_netmap_config:
        const char *ifname
        unsigned queue
        int busy_poll
        unsigned poll_ms
        unsigned pool_frames
    sp_io *sp_netmap_io_open(const sp_netmap_config *cfg, char *err, size_t errlen)
    int sp_have_netmap()

cdef extern from "stormpy/io/xdp_program.h" nogil:
    enum sp_xdp_attach_mode:
        SP_XDP_ATTACH_AUTO
        SP_XDP_ATTACH_NATIVE
        SP_XDP_ATTACH_GENERIC
    struct sp_xdp_prog:
        pass
    enum:
        SP_XDP_ANSWER
        SP_XDP_REFLECT
    sp_xdp_prog *sp_xdp_prog_attach(const char *ifname, uint16_t port, bint tcp, unsigned stages,
                                    sp_xdp_attach_mode mode, char *err, size_t errlen)
    void sp_xdp_prog_detach(sp_xdp_prog *prog)
    sp_xdp_attach_mode sp_xdp_prog_mode(const sp_xdp_prog *prog)
    unsigned sp_xdp_prog_queues(const sp_xdp_prog *prog)
    int sp_have_xdp()

cdef extern from "stormpy/io/xdp_answer.h" nogil:
    enum:
        SP_XDP_NAME_MAX
        SP_XDP_TAIL_MAX
        SP_XDP_ADDRS
        SP_XDP_ZONE_SLOTS
        SP_XDP_ANSWERED
        SP_XDP_PASSED
        SP_XDP_RCODES
        SP_XDP_ZONES
        SP_XDP_STATS
    struct sp_xdp_answer_key:
        pass
    struct sp_xdp_answer:
        pass
    struct sp_xdp_answer_config:
        uint8_t mac[6]
        uint8_t ttl
        uint8_t naddrs
        uint8_t addrs[8][4]
    int sp_xdp_answers_config(sp_xdp_prog *prog, const sp_xdp_answer_config *cfg)
    int sp_xdp_answers_begin(sp_xdp_prog *prog, uint32_t entries)
    int sp_xdp_answers_add(sp_xdp_prog *prog, const sp_xdp_answer_key *keys,
                           const sp_xdp_answer *values, uint32_t n)
    int sp_xdp_answers_publish(sp_xdp_prog *prog)
    int sp_xdp_answers_stats(const sp_xdp_prog *prog, uint64_t *out)
    int sp_xdp_prog_test_run(const sp_xdp_prog *prog, const void *data, uint32_t len,
                             void *out, uint32_t *out_len, uint32_t *verdict)
    int sp_xdp_prog_instructions(const sp_xdp_prog *prog, uint32_t *xlated, uint32_t *verified)

cdef extern from "stormpy/io/tcp_guard.h" nogil:
    struct sp_tcp_guard:
        pass
    struct sp_tcp_guard_addrs:
        unsigned nv4, nv6
        uint8_t v4[8][4]
        uint8_t v6[8][16]
    sp_tcp_guard *sp_tcp_guard_attach(const char *ifname, uint16_t port,
                                      const sp_tcp_guard_addrs *addrs, char *err, size_t errlen)
    void sp_tcp_guard_detach(sp_tcp_guard *guard)
    int sp_tcp_guard_uses_link(const sp_tcp_guard *guard)

cdef extern from "stormpy/io/xdp_socket.h" nogil:
    struct sp_xdp_config:
        uint32_t frame_size, rx_size, fill_size, tx_size, comp_size
        int copy_mode
        int poll
        int poll_timeout_ms
        uint32_t pool_frames
        uint32_t tx_limit
    sp_io *sp_xdp_io_open(sp_xdp_prog *prog, uint32_t queue_id, const sp_xdp_config *cfg,
                          char *err, size_t errlen)


cdef extern from "stormpy/gen/latency.h" nogil:
    struct sp_latency:
        uint64_t total, min, max
        double sum
    sp_latency *sp_latency_new()
    void sp_latency_free(sp_latency *h)
    void sp_latency_record(sp_latency *h, uint64_t v)
    uint64_t sp_latency_percentile(const sp_latency *h, double pct)

cdef extern from "stormpy/gen/gen.h" nogil:
    enum:
        SP_GEN_DNS
        SP_GEN_ECHO
        SP_GEN_HTTP
        SP_GEN_MAX_SOCKETS
        SP_GEN_MAX_REQUEST
        SP_GEN_MAX_BATCH
    struct sp_gen_ring:
        sp_io *io
        uint8_t family
        uint8_t src[16]
        uint8_t dst[16]
        uint8_t src_mac[6]
        uint8_t dst_mac[6]
        uint16_t sport, dport
        uint8_t ttl
    struct sp_gen_config:
        int kind
        int *fds
        uint32_t nfds
        const sp_gen_ring *ring
        const uint8_t *requests
        const uint32_t *offsets
        uint32_t nrequests
        uint64_t rate
        uint32_t outstanding, pipeline
        uint64_t count, duration_ns, timeout_ns
        uint32_t batch
    struct sp_gen_counters:
        uint64_t sent, received, lost, late, unmatched
        uint64_t would_block, send_errors, refused, window_full, closed, bad_replies
        uint64_t codes[8]
        uint64_t started_ns, send_end_ns, ended_ns, max_lag_ns
    struct sp_gen:
        pass
    sp_gen *sp_gen_new(const sp_gen_config *cfg)
    void sp_gen_free(sp_gen *g)
    int sp_gen_run(sp_gen *g, sp_gen_counters *c)
    void sp_gen_stop(sp_gen *g)
    void sp_gen_snapshot(const sp_gen_counters *c, sp_gen_counters *out)
    const sp_latency *sp_gen_latency(const sp_gen *g)

cdef extern from "stormpy/zone/zone.h" nogil:
    enum:
        SP_ZONE_OK
        SP_ZONE_DECLINED
        SP_ZONE_NOMEM
    struct sp_zone_name:
        uint32_t off
        uint8_t len
        uint32_t first_rrset
        uint16_t nrrsets
    struct sp_zone_rrset:
        uint32_t name, ttl, first
        uint16_t type, count
    struct sp_zone_rdata:
        uint32_t off
        uint16_t len
    struct sp_zone:
        uint32_t nnames, ndead, nrrsets, nrdatas, nrecords, origin, serial, soa
        bint pending
        sp_zone_name *names
        sp_zone_rrset *rrsets
        sp_zone_rdata *rdatas
        uint8_t *arena
        uint8_t *rdata_arena
        char why[512]
        uint32_t outside, first_outside, ttl_mismatch, first_ttl_mismatch
    struct sp_zone_compile_stats:
        uint64_t keys, responses, oversized
        uint32_t oversized_name
        uint16_t oversized_type
        bint oversized_below
    sp_zone *sp_zone_new()
    sp_zone *sp_zone_copy(const sp_zone *z)
    void sp_zone_free(sp_zone *z)
    int sp_zone_read(sp_zone *z, const char *path, const char *origin)
    int sp_zone_add_record(sp_zone *z, const uint8_t *owner, size_t owner_len, uint16_t type,
                           uint32_t ttl, const uint8_t *rdata, size_t rdlen)
    int sp_zone_finish(sp_zone *z, const uint8_t *origin, size_t origin_len)
    int sp_zone_reopen(sp_zone *z, const uint8_t *const *names, const size_t *lens,
                       size_t count)
    bint sp_zone_reader_available()
    bint sp_zone_type_patchable(uint16_t type)
    uint32_t sp_zone_lookup(const sp_zone *z, const uint8_t *wire, size_t len)
    uint32_t sp_zone_find(const sp_zone *z, const uint8_t *wire, size_t len)
    int sp_zone_write(sp_zone *z, const char *path)
    const uint8_t *sp_zone_name_wire(const sp_zone *z, uint32_t id)
    int sp_zone_compile(sp_zone *z, sp_table_builder *b, uint32_t slot,
                        sp_zone_compile_stats *stats)
    int sp_zone_recompile(sp_zone *z, sp_table_builder *b, uint32_t slot,
                          sp_zone_compile_stats *stats)

cdef extern from "stormpy/zone/transfer.h" nogil:
    enum sp_zone_walk_phase:
        SP_ZONE_WALK_DONE
    struct sp_zone_walk:
        sp_zone_walk_phase phase
    const uint32_t SP_ZONE_FROM_OLD
    void sp_zone_walk_init(sp_zone_walk *w)
    size_t sp_zone_walk_write(const sp_zone *z, sp_zone_walk *w, uint8_t *out, size_t cap,
                              size_t budget, uint16_t origin_at, uint16_t section_at,
                              uint16_t *count)
    int sp_zone_difference(const sp_zone *old, const sp_zone *now, size_t limit,
                           uint32_t **out, size_t *count)

cdef extern from "stormpy/zone/axfr.h" nogil:
    enum:
        SP_ZONE_AXFR_DONE
    struct sp_zone_axfr_config:
        const uint8_t *origin
        size_t origin_len
        uint16_t id
        const char *key_name
        const char *key_secret
        const char *algorithm
        const uint8_t *request_mac
        size_t request_mac_len
    struct sp_zone_axfr:
        pass
    sp_zone_axfr *sp_zone_axfr_new(sp_zone *z, const sp_zone_axfr_config *cfg)
    int sp_zone_axfr_message(sp_zone_axfr *a, const uint8_t *wire, size_t len, uint64_t now)
    void sp_zone_axfr_free(sp_zone_axfr *a)
