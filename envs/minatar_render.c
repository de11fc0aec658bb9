// minatar_render.c: see minatar_render.h for the rules this draws by.
#include "minatar_render.h"

#include "apex.h"

#include <string.h>

// 84 / 10: cells are 8 or 9 pixels wide, which s_fill_cell relies on.
_Static_assert(MINATAR_RENDER_SIZE / MINATAR_SIZE == 8, "cells are 8 or 9 pixels wide");

// First pixel of cell k along either axis, k = 0 .. MINATAR_SIZE: the smallest p with
// floor(p * 10 / 84) = k, that is ceil(84 k / 10) (0 9 17 26 34 42 51 59 68 76, then 84).
#define S_FIRST(k) ((MINATAR_RENDER_SIZE * (k) + MINATAR_SIZE - 1) / MINATAR_SIZE)

uint8_t minatar_render_gray(int channels, int c) {
    APEX_ASSERT(channels >= 1 && channels <= MINATAR_MAX_CHANNELS && c >= 0 && c < channels);
    return (uint8_t)(255 * (c + 1) / channels);
}

// Pixels [first, next) of row = level: an 8-byte store at first and one ending at next. A
// cell is 8 or 9 pixels, so the two cover it exactly (overlapping by 7 or 8 bytes) and never
// touch the next cell: two stores instead of a memset call of a variable size.
static inline void s_fill_cell(uint8_t *row, int first, int next, uint8_t level) {
    const uint64_t v = (uint64_t)level * 0x0101010101010101ull;
    memcpy(row + first, &v, sizeof v);
    memcpy(row + next - 8, &v, sizeof v);
}

void minatar_render(const uint8_t *grid, int channels, uint8_t *frame) {
    APEX_ASSERT(channels >= 1 && channels <= MINATAR_MAX_CHANNELS);
    // level[0] is the background, level[c + 1] channel c's gray.
    uint8_t level[MINATAR_MAX_CHANNELS + 1] = {0};
    for (int c = 0; c < channels; c++) {
        level[c + 1] = minatar_render_gray(channels, c);
    }
    const size_t W = MINATAR_RENDER_SIZE;
    for (int cy = 0; cy < MINATAR_SIZE; cy++) {
        // The cell row's first pixel row, written cell by cell (y, x, c: channels last) ...
        uint8_t *row = frame + (size_t)S_FIRST(cy) * W;
        const uint8_t *cell = grid + (size_t)cy * MINATAR_SIZE * (size_t)channels;
        for (int cx = 0; cx < MINATAR_SIZE; cx++, cell += channels) {
            int top = channels; // 1 + the highest channel set; 0 when none is
            while (top > 0 && !cell[top - 1]) {
                top--;
            }
            s_fill_cell(row, S_FIRST(cx), S_FIRST(cx + 1), level[top]);
        }
        // ... then copied to the cell row's other 7 or 8 pixel rows.
        for (int y = S_FIRST(cy) + 1; y < S_FIRST(cy + 1); y++) {
            memcpy(frame + (size_t)y * W, row, W);
        }
    }
}

void minatar_render_observe(const minatar_t *m, uint8_t *frame) {
    uint8_t grid[MINATAR_MAX_OBS];
    minatar_observe(m, grid);
    minatar_render(grid, m->game->channels, frame);
}
