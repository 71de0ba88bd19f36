/* rng — small deterministic random numbers: a splitmix64-seeded xoshiro256** stream
 * for initialisation and sampling, and a stateless 64-bit mixer for keyed hashing
 * (the data order is a pure function of seed and position, so runs resume exactly). */
#ifndef GT_RNG_H
#define GT_RNG_H

#include <stdint.h>

typedef struct rng { uint64_t s[4]; } rng;

void rng_seed(rng *r, uint64_t seed);
uint64_t rng_u64(rng *r);
/* Uniform in [0, 1) with 24 random bits. */
float rng_uniform(rng *r);
/* Standard normal (Box-Muller, double inside). */
float rng_normal(rng *r);
/* Mixes x and key into 64 well-spread bits (stateless). */
uint64_t rng_hash(uint64_t x, uint64_t key);

#endif
