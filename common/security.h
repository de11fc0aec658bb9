// security.h: CurveZMQ authentication and encryption for every apex socket.
//
// With [security] mode = curve, every connection is encrypted and both ends are
// authenticated:
//   - each daemon has a key pair in <key_dir>/<name>.key (a ZeroMQ certificate, Z85 text,
//     readable by its owner only); names are "replay", "learner", and "actor" (or
//     "actor<i>" when that file exists, for per-host actor keys);
//   - clients know the server's public key (<key_dir>/<server>.pub) and refuse any server
//     that does not hold the matching secret key;
//   - servers run a ZAP handler (RFC 27) that accepts only clients whose public key is
//     listed in [security] authorized_keys; every other client is refused before any
//     message of it is delivered, and counted.
// With mode = none nothing changes (plain TCP): fine on a trusted, isolated network.
// Keys are made by `apex-keygen`. A missing, unreadable, malformed or too-open key file is a
// start-up error naming the file.
// Not thread-safe: one security_t per daemon, used from the daemon's loop thread.
#ifndef APEX_SECURITY_H
#define APEX_SECURITY_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "loop.h"

#define SECURITY_KEY_Z85_LEN 40

typedef struct security security_t;

// Loads the daemon's key pair and, when it serves (is_server), the allow-list, and binds the
// ZAP handler in ctx (before any server socket binds). name: "replay", "learner", "actor";
// actor_index selects "actor<i>" when that key exists (-1 otherwise). With mode none,
// returns an object whose functions do nothing. NULL after logging why.
security_t *security_new(void *ctx, const apex_config_t *cfg, const char *name, int actor_index,
                         int is_server);
void security_destroy(security_t **self_p);

// Makes sock a CURVE server (before bind). Returns 0 or -1 (logged).
int security_server(security_t *self, void *sock);
// Makes sock a CURVE client of <server_name> (before connect); self NULL or mode none: a
// plain socket. Returns 0 or -1 (logged).
int security_client(security_t *self, void *sock, const char *server_name);

// Adds the ZAP handler's socket to loop (servers with mode curve; otherwise a no-op).
void security_attach(security_t *self, loop_t *loop);
// Clients refused by the ZAP handler so far (not on the allow-list).
uint64_t security_denied(const security_t *self);
// For code that polls its sockets itself instead of running a loop_t (envs/pyenv.c): the
// ZAP handler's socket (NULL unless a curve server), and one turn of the handler, which
// answers one waiting request without blocking; returns 1 if it answered one, else 0.
void *security_zap_socket(const security_t *self);
int security_zap_handle(security_t *self);
// This daemon's Z85 public key ("" with mode none), e.g. to hand to a client it spawns.
const char *security_public_key(const security_t *self);

// Generates a key pair and writes <dir>/<name>.key (mode 0600) and <dir>/<name>.pub.
// Returns 0 or -1 with a message in err. For apex-keygen.
int security_keygen(const char *dir, const char *name, char *public_z85_out, char *err,
                    size_t errlen);

// Reads the Z85 public key (and, if secret_out is not NULL, the secret key) from a key file.
// Returns 0 or -1 with "path: reason" in err.
int security_read_key_file(const char *path, char *public_out, char *secret_out, char *err,
                           size_t errlen);

#endif
