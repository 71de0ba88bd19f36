/* amx_tiles — the AMX tile configuration as LDTILECFG reads it, and palette 1's limits.
 *
 * Shared by the two builds of the AMX matrix product (gemm_bf16_amx.c on the hardware,
 * gemm_bf16_amx_emul.c on amx_emul.c's software model) and by the tile peak loop in
 * cpu_features.c, so all of them describe tiles with the same 64 bytes.
 *
 * Layout (Intel SDM, LDTILECFG): byte 0 the palette (0 = none, 1 = 8 tiles of up to 16
 * rows x 64 bytes), byte 1 the start row (for restarting an interrupted load or store;
 * 0 here), bytes 2-15 reserved (zero), then 16 little-endian 16-bit "bytes per row"
 * and 16 one-byte row counts; palette 1 uses the first 8 of each, the rest must be zero.
 * A tile with 0 rows must have 0 bytes per row and the other way round. */
#ifndef GT_AMX_TILES_H
#define GT_AMX_TILES_H

#include <stdint.h>
#include <string.h>

enum {
    AMX_TILES = 8,     /* palette 1: tmm0 .. tmm7 */
    AMX_MAX_ROWS = 16, /* rows of a tile */
    AMX_MAX_COLSB = 64 /* bytes per row: 16 FP32, or 32 BF16 (16 pairs) */
};

typedef struct {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_tilecfg;

_Static_assert(sizeof(amx_tilecfg) == 64, "LDTILECFG reads 64 bytes");

/* Palette 1 with the first `ntiles` tiles all `rows` x `colsb`, the others unused. */
static inline void amx_tilecfg_uniform(amx_tilecfg *cfg, int ntiles, int rows, int colsb)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->palette = 1;
    for (int t = 0; t < ntiles; t++) {
        cfg->rows[t] = (uint8_t)rows;
        cfg->colsb[t] = (uint16_t)colsb;
    }
}

#endif
