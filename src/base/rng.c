/* rng — see rng.h.
 *
 * The stream generator is xoshiro256** (Blackman & Vigna), seeded by running
 * splitmix64 over the 64-bit seed so that nearby seeds (0, 1, 2, ...) give unrelated
 * streams and the state is never all zero. */
#include "rng.h"

#include <math.h>

static inline uint64_t rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* One splitmix64 step: advances *state and returns a well-mixed value. */
static uint64_t splitmix64_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void rng_seed(rng *r, uint64_t seed)
{
    uint64_t st = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64_next(&st);
    /* splitmix64 is a bijection of its counter, so four consecutive outputs cannot all
     * be zero; guard anyway since an all-zero state would be stuck forever. */
    if ((r->s[0] | r->s[1] | r->s[2] | r->s[3]) == 0) r->s[0] = 1;
}

uint64_t rng_u64(rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

float rng_uniform(rng *r)
{
    /* The top 24 bits are exactly representable in a float mantissa, so the result is
     * k / 2^24 for k in [0, 2^24): never rounds up to 1.0f. */
    return (float)(rng_u64(r) >> 40) * (1.0f / 16777216.0f);
}

float rng_normal(rng *r)
{
    /* Box-Muller without caching the second value (the state struct holds only the
     * generator), so each call consumes exactly two draws: deterministic and simple. */
    double u1 = ((double)(rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0); /* (0,1] */
    double u2 = (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);        /* [0,1) */
    double rad = sqrt(-2.0 * log(u1));
    return (float)(rad * cos(6.283185307179586476925 * u2));
}

/* A 64-bit finaliser with full avalanche (every input bit flips each output bit with
 * probability close to 1/2). */
static inline uint64_t mix64(uint64_t z)
{
    z ^= z >> 32;
    z *= 0xD6E8FEB86659FD93ull;
    z ^= z >> 32;
    z *= 0xD6E8FEB86659FD93ull;
    z ^= z >> 32;
    return z;
}

uint64_t rng_hash(uint64_t x, uint64_t key)
{
    /* Two rounds: the key is mixed on its own first so that related keys (seed, seed+1,
     * seed ^ small constant) do not give related functions of x, then folded into x
     * before and after the second mix. */
    uint64_t k = mix64(key ^ 0x6A09E667F3BCC909ull);
    uint64_t z = mix64(x + k);
    return mix64(z ^ rotl64(k, 29) ^ 0xBB67AE8584CAA73Bull);
}
