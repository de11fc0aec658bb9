// minatar_render.h: a MinAtar frame (10 x 10 x C cells of 0/1) drawn as one 84 x 84 grayscale
// image, the input shape of the Nature DQN (Mnih et al. 2015), so that an Atari-shaped pipeline
// runs on real games. The specs "MinAtar/<Game>-render84-v0" (env_minatar.c) step the game of
// "MinAtar/<Game>-v0" and observe it through minatar_render.
//
// The rendering, exactly (README.md "MinAtar as pixels" and docs/architecture.md restate it):
// - Gray levels. Channel c (0 .. C-1, the game's channel order, minatar.h) of a game with C
//   channels is drawn at gray(c) = floor(255 * (c + 1) / C): distinct, nonzero, the last
//   channel at 255. The background (a cell with no channel set) is 0. A cell with several
//   channels set takes the level of the highest channel index set (MinAtar's own
//   display_state draws np.amax(state * (arange(C) + 1)), the same rule). The levels:
//     C = 4  (Asterix, Breakout)  63 127 191 255
//     C = 6  (SpaceInvaders)      42 85 127 170 212 255
//     C = 7  (Freeway)            36 72 109 145 182 218 255
//     C = 10 (Seaquest)           25 51 76 102 127 153 178 204 229 255
// - Upscaling. Nearest neighbour: pixel (y, x), 0 <= y, x < 84, shows cell
//   (floor(y * 10 / 84), floor(x * 10 / 84)). 84 is not a multiple of 10, so cells are 9 or
//   8 pixels wide: cell k covers pixels ceil(8.4 k) .. ceil(8.4 (k + 1)) - 1, widths
//   9 8 9 8 8 9 8 9 8 8 (first pixels 0 9 17 26 34 42 51 59 68 76), the same along y and x.
// - Layout: 84 rows of 84 bytes, row-major, one channel (obs_h 84, obs_w 84, obs_c 1); the
//   network multiplies the bytes by 1/255 (the row's obs_scale).
//
// What it does not do: colour, frame stacking ([env] frame_stack, in the actor), max-pooling
// over frames or anything else Atari's preprocessing does to ALE frames, or allocate. Cost:
// one pass over the C x 100 cells, one row of 84 bytes written per cell row and copied to the
// cell's other 7 or 8 pixel rows.
#ifndef APEX_MINATAR_RENDER_H
#define APEX_MINATAR_RENDER_H

#include "minatar.h"

#include <stdint.h>

#define MINATAR_RENDER_SIZE 84 // the frame is MINATAR_RENDER_SIZE x MINATAR_RENDER_SIZE bytes
#define MINATAR_RENDER_BYTES (MINATAR_RENDER_SIZE * MINATAR_RENDER_SIZE)

// The gray level of channel c (0 <= c < channels <= MINATAR_MAX_CHANNELS, asserted):
// floor(255 * (c + 1) / channels). Thread-safe.
uint8_t minatar_render_gray(int channels, int c);

// Draws grid (10 x 10 x channels bytes, [y][x][c], 0 or nonzero: a minatar_observe frame)
// into frame (MINATAR_RENDER_BYTES bytes, every one written) by the rules above. channels in
// 1 .. MINATAR_MAX_CHANNELS is asserted. Thread-safe; no allocation.
void minatar_render(const uint8_t *grid, int channels, uint8_t *frame);

// minatar_observe of m, rendered: the frame the render84 specs observe. Uses a
// MINATAR_MAX_OBS-byte scratch grid on the stack.
void minatar_render_observe(const minatar_t *m, uint8_t *frame);

#endif
