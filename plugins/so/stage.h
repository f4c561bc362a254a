/* stage.h — the staging buffer of plexporter-so's emitter (dl.go, emit.go).
 *
 * The emitter's sample() copies each value sample the catalogue admits
 * into a stage in C memory and returns; Go drains the stage once it is
 * full, when the library calls anything else, when collect returns, and
 * when the plugin gives up on a collect. One C->Go callback per
 * SO_STAGE_SAMPLES samples instead of one per sample.
 *
 * The library's thread inside collect is the only producer. Entries below
 * n are published (n is stored with release order after the entry, its
 * label lengths and bytes): a drain, always under the relay's mutex, may
 * read them from another thread (the plugin giving up) while the producer
 * writes past n. Only the producer resets the stage, inside a drain it
 * called itself, so no reader is in it then.
 */
#ifndef PLEXPORTER_SO_STAGE_H
#define PLEXPORTER_SO_STAGE_H

#include <pthread.h>
#include <stdint.h>

#define SO_STAGE_SAMPLES 4096
#define SO_STAGE_LABELS (SO_STAGE_SAMPLES * 4)
#define SO_STAGE_BYTES (256 << 10)
#define SO_STAGE_FAMILIES (1 << 16) /* maxFamilies */
#define SO_STAGE_NOT_VALUE 0xff     /* kind of a histogram family */

struct so_entry {
	uint32_t family;
	uint32_t lens_end;  /* lens[] index after this sample's label lengths */
	uint32_t bytes_end; /* bytes[] offset after this sample's label values */
	uint32_t pad;
	double value;
};

struct so_stage {
	uintptr_t relay;  /* cgo.Handle of the relay */
	pthread_t thread; /* the thread inside collect */
	uint32_t stopped; /* set (atomically) once the collect is given up on */
	uint32_t n_families;
	uint32_t n;              /* published entries */
	uint32_t nlens, nbytes;  /* the producer's cursors */
	uint32_t done;           /* entries drained (under the relay's mutex) */
	uint32_t done_lens, done_bytes;
	uint8_t kind[SO_STAGE_FAMILIES]; /* label count of a value family, or SO_STAGE_NOT_VALUE */
	struct so_entry entries[SO_STAGE_SAMPLES];
	uint32_t lens[SO_STAGE_LABELS];
	char bytes[SO_STAGE_BYTES];
};

#endif
