// apex-keygen: makes CurveZMQ key pairs for [security] mode = curve.
//
//   apex-keygen DIR [NAME ...]
// writes DIR/NAME.key (the secret certificate, mode 0600) and DIR/NAME.pub for each NAME
// (default: replay learner actor), and appends the public keys of the clients among them
// (learner, actor*, envworker*: the Python env workers that connect to an actor's bridge,
// [python] transport = zmq) to DIR/authorized_keys, the allow-list the servers read. Copy each
// .key only to the host that runs that daemon, and the .pub files to every host.
#include "security.h"

#include <stdio.h>
#include <string.h>

static int s_is_client(const char *name) {
    return strcmp(name, "learner") == 0 || strncmp(name, "actor", 5) == 0 ||
           strncmp(name, "envworker", 9) == 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: apex-keygen DIR [NAME ...]   (default names: replay learner actor)\n"
                "  writes DIR/NAME.key (secret, 0600) and DIR/NAME.pub, and adds the client\n"
                "  keys (learner, actor*, envworker*) to DIR/authorized_keys\n");
        return argc < 2 ? 2 : 0;
    }
    const char *dir = argv[1];
    const char *defaults[] = {"replay", "learner", "actor"};
    int n = argc > 2 ? argc - 2 : 3;
    const char *const *names = argc > 2 ? (const char *const *)argv + 2 : defaults;
    char path[1024];
    snprintf(path, sizeof path, "%s/authorized_keys", dir);
    for (int i = 0; i < n; i++) {
        char pub[SECURITY_KEY_Z85_LEN + 1], err[512];
        if (strchr(names[i], '/') || !names[i][0]) {
            fprintf(stderr, "apex-keygen: bad name '%s'\n", names[i]);
            return 2;
        }
        if (security_keygen(dir, names[i], pub, err, sizeof err) != 0) {
            fprintf(stderr, "apex-keygen: %s\n", err);
            return 1;
        }
        printf("%s/%s.key, %s/%s.pub: %s\n", dir, names[i], dir, names[i], pub);
        if (s_is_client(names[i])) {
            FILE *f = fopen(path, "a");
            if (!f || fprintf(f, "%s %s\n", pub, names[i]) < 0 || fclose(f) != 0) {
                fprintf(stderr, "apex-keygen: cannot append to %s\n", path);
                return 1;
            }
            printf("  authorized in %s\n", path);
        }
    }
    return 0;
}
