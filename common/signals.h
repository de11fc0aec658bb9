// signals.h: shutdown on SIGINT/SIGTERM (STYLE S15).
//
// The handler only sets a volatile sig_atomic_t flag that the daemon's loop polls; the
// first signal asks for an orderly shutdown (flush metrics, final checkpoint), a second one
// exits at once with status 130. SIGPIPE and SIGXFSZ are ignored (a dead peer or a
// file-size limit is an error code, not a death). Install once, from main's start-up path.
#ifndef APEX_SIGNALS_H
#define APEX_SIGNALS_H

#include <signal.h>

extern volatile sig_atomic_t signals_shutdown_requested; // the second allowed global (S25)

void signals_install(void);
static inline int signals_should_stop(void) { return signals_shutdown_requested != 0; }

#endif
