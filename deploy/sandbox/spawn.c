/*
 * spawn: how the sandbox-manager starts a bubblewrap sandbox, in one exec.
 *
 *   spawn [--join FILE]... [--join-errors FILE] [--ids UID:GID] [--limit RES=N]...
 *         -- PROGRAM [ARG]...
 *
 * It replaces a chain of three programs (sh moving itself into the sandbox's cgroups,
 * setpriv dropping to the sandbox uid, prlimit setting the rlimits) that cost a sandbox
 * start about 3 ms of CPU more than this static binary (each is a dynamically linked
 * exec). The order is the chain's, and it is what makes the limits hold:
 *
 *   1. --join: as root, write our pid into each FILE (a cgroup.procs), so that nothing
 *      of the sandbox ever runs outside its groups; once the uid is dropped no process
 *      can move itself out again. A failed join exits 125 with its reason in
 *      --join-errors (a host-only file: the sandbox's own stderr goes nowhere).
 *   2. --ids: clear the supplementary groups, then set real, effective and saved gid and
 *      uid (the gid first: it cannot be changed once the uid is dropped).
 *   3. --limit: soft and hard rlimit RES (cpu, as, nproc, fsize, core, nofile) to N, as
 *      the sandbox uid, so that RLIMIT_NPROC counts that uid's processes.
 *   4. exec PROGRAM (an absolute path: there is no PATH search).
 *
 * Any other failure exits 126 (127 when the exec fails) with its reason on stderr. The
 * arguments come from the sandbox-manager only; a sandbox never runs this program.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define JOIN_FAILED 125
#define SETUP_FAILED 126
#define EXEC_FAILED 127
#define MAX_ITEMS 16

struct limit {
    int resource;
    rlim_t value;
};

static const struct {
    const char *name;
    int resource;
} RESOURCES[] = {
    {"cpu", RLIMIT_CPU},     {"as", RLIMIT_AS},     {"nproc", RLIMIT_NPROC},
    {"fsize", RLIMIT_FSIZE}, {"core", RLIMIT_CORE}, {"nofile", RLIMIT_NOFILE},
};

static void die(int status, const char *what, const char *detail) {
    fprintf(stderr, "spawn: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(status);
}

static unsigned long long number(const char *text, const char *what) {
    char *end;
    errno = 0;
    unsigned long long n = strtoull(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-') die(SETUP_FAILED, "not a number", what);
    return n;
}

static struct limit parse_limit(const char *arg) {
    const char *eq = strchr(arg, '=');
    if (!eq) die(SETUP_FAILED, "--limit wants RES=N", arg);
    for (size_t i = 0; i < sizeof RESOURCES / sizeof RESOURCES[0]; i++) {
        size_t len = strlen(RESOURCES[i].name);
        if ((size_t)(eq - arg) == len && strncmp(arg, RESOURCES[i].name, len) == 0)
            return (struct limit){RESOURCES[i].resource, (rlim_t)number(eq + 1, arg)};
    }
    die(SETUP_FAILED, "unknown rlimit", arg);
    return (struct limit){0, 0};
}

/* Writes "FILE: reason" to the errors file and exits JOIN_FAILED. */
static void join_failed(const char *errors, const char *file, int err) {
    if (errors) {
        int fd = open(errors, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0) {
            dprintf(fd, "%s: %s\n", file, strerror(err));
            close(fd);
        }
    }
    exit(JOIN_FAILED);
}

static void join(const char *file, const char *errors) {
    int fd = open(file, O_WRONLY | O_CLOEXEC);
    if (fd < 0) join_failed(errors, file, errno);
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (write(fd, pid, (size_t)len) != len) {
        int err = errno;
        close(fd);
        join_failed(errors, file, err);
    }
    close(fd);
}

static void drop_ids(const char *ids) {
    const char *colon = strchr(ids, ':');
    if (!colon) die(SETUP_FAILED, "--ids wants UID:GID", ids);
    char uid_text[32];
    size_t len = (size_t)(colon - ids);
    if (len == 0 || len >= sizeof uid_text) die(SETUP_FAILED, "--ids wants UID:GID", ids);
    memcpy(uid_text, ids, len);
    uid_text[len] = 0;
    uid_t uid = (uid_t)number(uid_text, ids);
    gid_t gid = (gid_t)number(colon + 1, ids);
    if (setgroups(0, NULL)) die(SETUP_FAILED, "setgroups", strerror(errno));
    if (setresgid(gid, gid, gid)) die(SETUP_FAILED, "setresgid", strerror(errno));
    if (setresuid(uid, uid, uid)) die(SETUP_FAILED, "setresuid", strerror(errno));
    /* No way back: a dropped uid must not be able to regain root. */
    if (setresuid(0, 0, 0) == 0 && uid != 0) die(SETUP_FAILED, "ids", "root regained");
}

int main(int argc, char **argv) {
    const char *joins[MAX_ITEMS];
    struct limit limits[MAX_ITEMS];
    size_t n_joins = 0, n_limits = 0;
    const char *errors = NULL, *ids = NULL;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (i + 1 >= argc || strcmp(argv[i + 1], "--") == 0)
            die(SETUP_FAILED, "missing value for", argv[i]);
        const char *value = argv[++i];
        if (strcmp(argv[i - 1], "--join") == 0) {
            if (n_joins == MAX_ITEMS) die(SETUP_FAILED, "too many", "--join");
            joins[n_joins++] = value;
        } else if (strcmp(argv[i - 1], "--join-errors") == 0) {
            errors = value;
        } else if (strcmp(argv[i - 1], "--ids") == 0) {
            ids = value;
        } else if (strcmp(argv[i - 1], "--limit") == 0) {
            if (n_limits == MAX_ITEMS) die(SETUP_FAILED, "too many", "--limit");
            limits[n_limits++] = parse_limit(value);
        } else {
            die(SETUP_FAILED, "unknown option", argv[i - 1]);
        }
    }
    if (i + 1 >= argc) die(SETUP_FAILED, "usage", "spawn [options] -- PROGRAM [ARG]...");
    if (argv[i + 1][0] != '/') die(SETUP_FAILED, "PROGRAM must be an absolute path", argv[i + 1]);

    for (size_t j = 0; j < n_joins; j++) join(joins[j], errors);
    if (ids) drop_ids(ids);
    for (size_t j = 0; j < n_limits; j++) {
        struct rlimit rl = {limits[j].value, limits[j].value};
        if (setrlimit(limits[j].resource, &rl)) die(SETUP_FAILED, "setrlimit", strerror(errno));
    }
    execv(argv[i + 1], argv + i + 1);
    die(EXEC_FAILED, argv[i + 1], strerror(errno));
    return EXEC_FAILED;
}
