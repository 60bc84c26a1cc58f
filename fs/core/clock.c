/*
 * clock.c - the time and the random bytes a filesystem stamps into what it writes: inode
 * times, checkpoint and segment ages, the UUID, inode generations and encryption nonces
 * (see super.h).
 *
 * Owns: the system clock and getrandom as the filesystem sees them, and pinning both for an
 * offline builder that must make the same image from the same input (mkfs.zlfs --timestamp).
 * May call: nothing but libc.
 *
 * Pinned, the clock stands still at the given time and the random bytes come from a
 * splitmix64 stream seeded by the caller. Nothing stamped needs to be secret: generations and
 * nonces must only differ from one another (a file key is derived from the master key and the
 * nonce, so a known nonce gives nothing away), and a 64-bit stream gives distinct 128-bit
 * nonces for any tree an offline builder writes. The pin is process-wide: only single-purpose
 * tools (mkfs.zlfs) set it, before anything is stamped.
 */
#include "super.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static struct {
	int on;
	uint64_t time_ns;
	uint64_t state;
	pthread_mutex_t lock;
} pin = {.lock = PTHREAD_MUTEX_INITIALIZER};

void zlfs_pin_clock(uint64_t time_ns, uint64_t seed)
{
	pin.time_ns = time_ns;
	pin.state = seed;
	pin.on = 1;
}

int zlfs_clock_pinned(void) { return pin.on; }

uint64_t zlfs_now_ns(void)
{
	struct timespec ts;

	if (pin.on)
		return pin.time_ns;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t zlfs_now_s(void) { return zlfs_now_ns() / 1000000000ULL; }

/* splitmix64 (Steele, Lea, Flood 2014): every output differs for 2^64 steps. */
static uint64_t pin_next(void)
{
	uint64_t z = (pin.state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

int zlfs_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	if (!pin.on) {
		while (len) {
			ssize_t n = getrandom(p, len, 0);

			if (n < 0 && errno != EINTR)
				return -errno;
			if (n > 0) {
				p += n;
				len -= (size_t)n;
			}
		}
		return 0;
	}
	pthread_mutex_lock(&pin.lock);
	while (len) {
		uint64_t v = pin_next();
		size_t n = len < sizeof(v) ? len : sizeof(v);

		memcpy(p, &v, n);
		p += n;
		len -= n;
	}
	pthread_mutex_unlock(&pin.lock);
	return 0;
}
