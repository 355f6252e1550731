/*
 * A zone in C sent to other servers: the records of an outbound AXFR (RFC 5936) written
 * straight from the store, and the names two stores hold differently, from which the
 * journal keeps a reloaded zone's changes for IXFR (RFC 1995). A zone of a million
 * records is transferred or compared without a copy of it in Python.
 */
#ifndef STORMPY_ZONE_TRANSFER_H
#define STORMPY_ZONE_TRANSFER_H

#include <stddef.h>
#include <stdint.h>

#include "stormpy/zone/zone.h"

enum sp_zone_walk_phase {
    SP_ZONE_WALK_OPENING_SOA = 0,
    SP_ZONE_WALK_RRSETS,
    SP_ZONE_WALK_CLOSING_SOA,
    SP_ZONE_WALK_DONE,
};

/* Where an outbound AXFR stands: the SOA, every other record, the SOA again. */
struct sp_zone_walk {
    uint32_t rrset, rdata;
    enum sp_zone_walk_phase phase;
};

static inline void sp_zone_walk_init(struct sp_zone_walk *w)
{
    *w = (struct sp_zone_walk){.phase = SP_ZONE_WALK_OPENING_SOA};
}

/* The records from w on, as an answer section holds them, into out (cap bytes): one
 * message's worth, stopping before the record that would take it past budget bytes
 * (the first is written whatever budget says, if it fits cap). An owner is a pointer
 * to its name written before in the section (at message offset section_at), else its
 * labels and a pointer to origin_at, where the message spells the zone's name (its
 * question); rdata goes as stored. Returns the bytes written, *count the records; w moves past
 * them, to SP_ZONE_WALK_DONE after the closing SOA. 0 bytes and w unmoved before the
 * end: the next record does not fit cap. */
size_t sp_zone_walk_write(const struct sp_zone *z, struct sp_zone_walk *w, uint8_t *out,
                          size_t cap, size_t budget, uint16_t origin_at, uint16_t section_at,
                          uint16_t *count);

/* The names whose records differ between old and now (a name either lacks counts as
 * holding none), into *out (malloc'd; the caller frees it) as ids of now's names, or
 * of old's with SP_ZONE_FROM_OLD set where now never saw the name. Stops at limit
 * names: SP_ZONE_DECLINED then (a change that large is not worth keeping). */
#define SP_ZONE_FROM_OLD 0x80000000u
int sp_zone_difference(const struct sp_zone *old, const struct sp_zone *now, size_t limit,
                       uint32_t **out, size_t *count);

#endif
