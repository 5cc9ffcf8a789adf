/*
 * The resident: one process inside each sandbox that runs commands and Python cells.
 *
 * Built static into the sandbox rootfs (/usr/libexec/assay/resident) by build-rootfs.sh.
 * The sandbox-manager (services/sandbox-manager/.../backends/_resident.py, the host end)
 * holds its stdin/stdout. On bubblewrap it is the sandbox's PID 1, so it also reaps every
 * orphan. It is a small C program, not Python, because one runs per live sandbox: an
 * interpreter's floor (~8 MiB RSS, ~20 ms CPU to start) was most of a sandbox's cost.
 *
 *   resident PORT GATEWAY_SOCKET KERNEL_SCRIPT
 *   resident --init        (a container's PID 1: reaps, never forks; see init_main)
 *
 * Wire (version PROTO_VERSION; _resident_wire.py is the host's half, keep both equal):
 * every message is a frame, a u32 big-endian length then that many bytes. A `bytes`
 * field is a u32 length then the bytes; integers are big-endian.
 *   hello   (first frame out): "ASRS" u32 version
 *   request: u8 op (1 exec, 2 python), u32 cap, u32 timeout_ms, then
 *            exec:   u8 flags (1: stdin given), bytes cwd, u32 argc, argc x bytes,
 *                    u32 envc, envc x (bytes key, bytes value), bytes stdin
 *            python: u8 flags (1: reset), bytes kernel_id, bytes code
 *   reply:   i32 exit_code, u8 flags (1: timed out), u64 stdout_dropped, bytes stdout,
 *            u64 stderr_dropped, bytes stderr, bytes restarted, bytes kernel_id,
 *            bytes kernel_reply (kernel.py's JSON, passed through unread)
 *
 * A command runs in a session of its own and ends when it exits and its output closes, or
 * at its timeout, when every process in the sandbox but this one is killed (SIGKILL to
 * -1, repeated until none is left: see kill_all). Python cells go to kernel.py, one
 * interpreter started on first use, over a SOCK_SEQPACKET socket that carries each cell's
 * three pipes. The process sleeps in poll() until a request, output, or a child's exit
 * (SIGCHLD through a signalfd): never a timer.
 * The model gateway's loopback port is forwarded on a thread: a thread survives the
 * timeout's kill(-1) sweep, a process would not.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROTO_VERSION 1u
#define CTL_IN 3
#define CTL_OUT 4
#define MAX_REQUEST (256u << 20) /* stdin or a cell's code; the host sends far less */
#define MAX_CAP (24u << 20)      /* per stream: two fit the host's 64 MiB reply bound */
#define MAX_ITEMS 65536u         /* argv or env entries */
#define KERNEL_REPLY_MAX (1u << 20)
#define GRACE_MS 50 /* a cell's output read on after the kernel answered */
#define MAX_DRAINS 64
#define GW_MAX_PAIRS 256
#define CHUNK 65536

extern char **environ;

static const char *kernel_script;
static int sigfd = -1;

/* ---- small helpers ------------------------------------------------------------------ */

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(const char *what) {
    /* stderr is /dev/null: the exit status is what the host sees. */
    (void)what;
    _exit(1);
}

static void write_all(int fd, const void *data, size_t n) {
    const uint8_t *p = data;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) die("write to host"); /* the host is gone: so is the sandbox */
        p += w;
        n -= (size_t)w;
    }
}

/* Reads exactly n bytes; false on end of file (the host closed the channel). */
static bool read_all(int fd, void *data, size_t n) {
    uint8_t *p = data;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void put_u64(uint8_t *p, uint64_t v) {
    put_u32(p, (uint32_t)(v >> 32));
    put_u32(p + 4, (uint32_t)v);
}

static void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* ---- reading a request: every length is checked against what is left ---------------- */

struct cursor {
    const uint8_t *p;
    size_t left;
    bool bad;
};

static bool take(struct cursor *c, size_t n, const uint8_t **out) {
    if (c->bad || n > c->left) {
        c->bad = true;
        return false;
    }
    *out = c->p;
    c->p += n;
    c->left -= n;
    return true;
}

static uint32_t get_u32(struct cursor *c) {
    const uint8_t *p;
    if (!take(c, 4, &p)) return 0;
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint8_t get_u8(struct cursor *c) {
    const uint8_t *p;
    return take(c, 1, &p) ? p[0] : 0;
}

static const uint8_t *get_bytes(struct cursor *c, uint32_t *len) {
    const uint8_t *p = NULL;
    *len = get_u32(c);
    if (!take(c, *len, &p)) *len = 0;
    return p;
}

/*
 * Strings for exec need a NUL each: they are copied into one arena sized from the request
 * (its bytes plus one per string), so nothing is allocated per field.
 */
struct arena {
    char *base;
    size_t used, size;
};

static char *get_str(struct cursor *c, struct arena *a) {
    uint32_t len;
    const uint8_t *p = get_bytes(c, &len);
    if (c->bad) return NULL;
    if (memchr(p, 0, len) || a->used + len + 1 > a->size) {
        c->bad = true; /* an embedded NUL would silently cut the string */
        return NULL;
    }
    char *s = a->base + a->used;
    memcpy(s, p, len);
    s[len] = 0;
    a->used += len + 1;
    return s;
}

/* ---- children: every exit is reaped (orphans too, as PID 1) ------------------------- */

struct child {
    pid_t pid;
    bool done;
    int code; /* exit status, or -signal */
};

static struct child cmd_child, kernel_child;

static void note_exit(pid_t pid, int status) {
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    struct child *mine[] = {&cmd_child, &kernel_child};
    for (size_t i = 0; i < 2; i++)
        if (mine[i]->pid == pid) mine[i]->done = true, mine[i]->code = code;
}

/* One waitpid(-1); false when no child is left or (WNOHANG) none has exited. */
static bool collect(int options) {
    int status;
    pid_t pid;
    do pid = waitpid(-1, &status, options);
    while (pid < 0 && errno == EINTR);
    if (pid <= 0) return false;
    note_exit(pid, status);
    return true;
}

static void reap(void) {
    struct signalfd_siginfo info;
    while (read(sigfd, &info, sizeof info) > 0) {
    }
    while (collect(WNOHANG)) {
    }
}

static void wait_for(struct child *c) {
    while (!c->done && collect(0)) {
    }
}

/*
 * SIGKILL every process this one may signal (the whole sandbox but itself and, in a
 * container, PID 1), and return only once none of them is left: every process a command
 * started is this one's descendant, and this one is PID 1 (bubblewrap) or their subreaper
 * (a container), so "no child left to reap" is "nothing of the command is left", and the
 * killed no longer count against the next command's NPROC.
 *
 * It cannot lose the race against a re-forking bomb: kill(-1) signals every process in
 * one walk of the task list under the lock a fork takes to add its child, and a fork whose
 * parent has SIGKILL pending by then fails; the sweep is repeated after every reap anyway,
 * so that even a process that appeared since is killed before this returns.
 */
static void kill_all(void) {
    do kill(-1, SIGKILL);
    while (collect(0));
}

/* ---- drains: output a background process still writes is read and dropped ----------- */

static int drains[MAX_DRAINS];
static size_t ndrains;

static void add_drain(int fd) {
    if (ndrains == MAX_DRAINS) {
        close(fd); /* none to spare: the writer gets EPIPE */
        return;
    }
    set_nonblock(fd);
    drains[ndrains++] = fd;
}

static size_t poll_drains(struct pollfd *pf) {
    for (size_t i = 0; i < ndrains; i++) pf[i] = (struct pollfd){.fd = drains[i], .events = POLLIN};
    return ndrains;
}

static void serve_drains(const struct pollfd *pf, size_t n) {
    static uint8_t sink[CHUNK];
    for (size_t i = n; i-- > 0;) {
        if (!pf[i].revents) continue;
        ssize_t r = read(pf[i].fd, sink, sizeof sink);
        if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR))) continue;
        close(pf[i].fd);
        drains[i] = drains[--ndrains]; /* descending: the moved one was already seen */
    }
}

/* ---- capped output --------------------------------------------------------------------- */

struct capped {
    uint8_t *buf;
    size_t len, alloc, cap;
    uint64_t dropped;
};

static void capped_feed(struct capped *c, const uint8_t *data, size_t n) {
    size_t keep = c->cap - c->len < n ? c->cap - c->len : n;
    if (keep && c->len + keep > c->alloc) {
        /* Grown as output comes, never to more than the cap. */
        size_t want = c->alloc ? c->alloc * 2 : CHUNK;
        if (want < c->len + keep) want = c->len + keep;
        if (want > c->cap) want = c->cap;
        uint8_t *b = realloc(c->buf, want);
        if (!b) keep = 0;
        else c->buf = b, c->alloc = want;
    }
    memcpy(c->buf + c->len, data, keep);
    c->len += keep;
    c->dropped += n - keep;
}

static void capped_text(struct capped *c, const char *s) { capped_feed(c, (const uint8_t *)s, strlen(s)); }

/* ---- replies --------------------------------------------------------------------------- */

struct reply {
    int32_t exit_code;
    bool timed_out;
    struct capped out, err;
    const char *restarted, *kernel_id;
    const uint8_t *kernel_reply;
    size_t kernel_reply_len;
};

static void send_reply(struct reply *r) {
    uint8_t head[4 + 4 + 1 + 8 + 4], mid[8 + 4], tail[3][4];
    const char *rs = r->restarted ? r->restarted : "", *kid = r->kernel_id ? r->kernel_id : "";
    size_t body = sizeof head - 4 + r->out.len + sizeof mid + r->err.len + sizeof tail + strlen(rs)
                  + strlen(kid) + r->kernel_reply_len;
    put_u32(head, (uint32_t)body);
    put_u32(head + 4, (uint32_t)r->exit_code);
    head[8] = r->timed_out ? 1 : 0;
    put_u64(head + 9, r->out.dropped);
    put_u32(head + 17, (uint32_t)r->out.len);
    put_u64(mid, r->err.dropped);
    put_u32(mid + 8, (uint32_t)r->err.len);
    put_u32(tail[0], (uint32_t)strlen(rs));
    put_u32(tail[1], (uint32_t)strlen(kid));
    put_u32(tail[2], (uint32_t)r->kernel_reply_len);
    struct iovec iov[] = {
        {head, sizeof head},       {r->out.buf, r->out.len}, {mid, sizeof mid},
        {r->err.buf, r->err.len},  {tail[0], 4},             {(void *)rs, strlen(rs)},
        {tail[1], 4},              {(void *)kid, strlen(kid)},
        {tail[2], 4},              {(void *)r->kernel_reply, r->kernel_reply_len},
    };
    size_t n = sizeof iov / sizeof iov[0];
    struct iovec *v = iov;
    while (n) {
        ssize_t w = writev(CTL_OUT, v, (int)n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) die("write to host");
        size_t done = (size_t)w;
        for (; n && done >= v->iov_len; v++, n--) done -= v->iov_len;
        if (n) v->iov_base = (uint8_t *)v->iov_base + done, v->iov_len -= done;
    }
    free(r->out.buf);
    free(r->err.buf);
}

__attribute__((format(printf, 3, 4))) static void send_error(uint32_t cap, int32_t code, const char *fmt, ...) {
    char msg[512];
    struct reply r = {.exit_code = code, .out.cap = cap, .err.cap = cap};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    capped_text(&r.err, msg);
    send_reply(&r);
}

/* ---- starting programs ----------------------------------------------------------------- */

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static const char *env_get(char *const envp[], const char *key) {
    size_t n = strlen(key);
    for (; *envp; envp++)
        if (!strncmp(*envp, key, n) && (*envp)[n] == '=') return *envp + n + 1;
    return NULL;
}

/* PATH lookup as the shell does it (an empty entry is the working directory). */
static const char *which(const char *name, char *const envp[], char *buf, size_t size) {
    if (strchr(name, '/')) return name;
    const char *path = env_get(envp, "PATH");
    if (!path) path = "/usr/bin:/bin";
    for (const char *d = path;; d++) {
        const char *end = strchrnul(d, ':');
        size_t len = (size_t)(end - d);
        while (len > 1 && d[len - 1] == '/') len--;
        int n = len ? snprintf(buf, size, "%.*s/%s", (int)len, d, name) : snprintf(buf, size, "./%s", name);
        if (n > 0 && (size_t)n < size && access(buf, X_OK) == 0 && !is_dir(buf)) return buf;
        if (!*end) return NULL;
        d = end;
    }
}

/* Between requests the resident sits in "/": no folder of the workspace is kept busy. */
static void back_to_root(void) {
    if (chdir("/")) die("chdir /");
}

/* posix_spawn in a new session with fds as 0, 1, 2 (and extra as 3), default signals. */
static int spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[], const int fds[3], int extra) {
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, defaults;
    posix_spawn_file_actions_init(&fa);
    for (int i = 0; i < 3; i++) posix_spawn_file_actions_adddup2(&fa, fds[i], i);
    if (extra >= 0) posix_spawn_file_actions_adddup2(&fa, extra, 3);
    posix_spawnattr_init(&at);
    sigemptyset(&none);
    /* This process ignores SIGPIPE and blocks SIGCHLD; a command gets the defaults back
       (SIGXFSZ too: the file size limit must kill it, as it would outside). */
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGXFSZ);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &defaults);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    int rc = posix_spawn(pid, path, &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return rc;
}

/* ---- moving bytes while a child runs --------------------------------------------------- */

struct pump {
    struct child *child;
    int out_fd, err_fd; /* -1 once closed */
    struct capped *out, *err;
    int feed_fd; /* the child's stdin (or a cell's code), -1 once all is written */
    const uint8_t *feed;
    size_t feed_left;
    int done_fd; /* the kernel's socket for a cell, -1 for a command */
    uint8_t *answer;
    size_t answer_len;
};

static void pump_output(int *fd, struct capped *c) {
    static uint8_t chunk[CHUNK];
    ssize_t r = read(*fd, chunk, sizeof chunk);
    if (r > 0) capped_feed(c, chunk, (size_t)r);
    else if (r == 0 || (errno != EAGAIN && errno != EINTR)) close_fd(fd);
}

static void pump_feed(struct pump *p) {
    ssize_t w = write(p->feed_fd, p->feed, p->feed_left);
    if (w > 0) p->feed += w, p->feed_left -= (size_t)w;
    else if (w < 0 && errno != EAGAIN && errno != EINTR) p->feed_left = 0; /* EPIPE: it stopped reading */
    if (!p->feed_left) close_fd(&p->feed_fd);
}

/*
 * Move bytes until the child exits (or, for a cell, the kernel answers) and its output
 * closes. False when the deadline passed first. Output still open at the end (a cell's
 * background process) goes to the drains so that its writer never blocks.
 */
static bool pump(struct pump *p, int64_t deadline) {
    int64_t finished_at = -1;
    bool finished = true;
    struct pollfd pf[5 + MAX_DRAINS];
    for (;;) {
        if (p->out_fd < 0 && p->err_fd < 0 && finished_at >= 0) break;
        int64_t now = now_ms(), limit = deadline;
        bool grace = finished_at >= 0 && p->done_fd >= 0;
        if (grace) {
            limit = finished_at + GRACE_MS;
            if (now >= limit) break;
        } else if (now >= deadline) {
            finished = false;
            break;
        }
        int fds[5] = {sigfd, p->out_fd, p->err_fd, p->feed_fd, finished_at < 0 ? p->done_fd : -1};
        for (int i = 0; i < 5; i++) pf[i] = (struct pollfd){.fd = fds[i], .events = i == 3 ? POLLOUT : POLLIN};
        size_t nd = poll_drains(pf + 5);
        int64_t wait = limit - now + 1;
        if (poll(pf, 5 + nd, wait > INT32_MAX ? INT32_MAX : (int)wait) < 0 && errno != EINTR) die("poll");
        serve_drains(pf + 5, nd);
        if (pf[0].revents) reap();
        if (pf[1].revents) pump_output(&p->out_fd, p->out);
        if (pf[2].revents) pump_output(&p->err_fd, p->err);
        if (pf[3].revents) pump_feed(p);
        if (pf[4].revents) {
            ssize_t r = recv(p->done_fd, p->answer, KERNEL_REPLY_MAX, MSG_DONTWAIT);
            p->answer_len = r > 0 ? (size_t)r : 0;
            finished_at = now_ms();
        }
        if (finished_at < 0 && p->child->done) {
            if (p->done_fd >= 0) break; /* the kernel died mid-cell: no answer */
            finished_at = now_ms();
        }
    }
    close_fd(&p->feed_fd);
    if (p->out_fd >= 0) add_drain(p->out_fd);
    if (p->err_fd >= 0) add_drain(p->err_fd);
    return finished;
}

/* ---- exec ------------------------------------------------------------------------------ */

struct request {
    uint8_t op;
    uint32_t cap, timeout_ms;
    struct cursor c;
};

/* The resident's environment with the request's entries over it. */
static char **merged_env(struct cursor *c, struct arena *a) {
    uint32_t envc = get_u32(c);
    size_t own = 0;
    while (environ[own]) own++;
    if (c->bad || envc > MAX_ITEMS) return NULL;
    char **env = calloc(own + envc + 1, sizeof *env), **extra = env + own;
    if (!env) return NULL;
    for (uint32_t i = 0; i < envc; i++) {
        char *key = get_str(c, a);
        bool has_value = get_str(c, a) != NULL; /* copied right after the key */
        if (!has_value || !*key || strchr(key, '=')) {
            c->bad = true; /* "a=b" as a name would set another variable */
            free(env);
            return NULL;
        }
        /* key and value sit side by side in the arena: the NUL between becomes '='. */
        key[strlen(key)] = '=';
        extra[i] = key;
    }
    size_t n = 0;
    for (size_t i = 0; i < own; i++) {
        size_t klen = strchrnul(environ[i], '=') - environ[i];
        bool overridden = false;
        for (uint32_t j = 0; j < envc && !overridden; j++)
            overridden = !strncmp(extra[j], environ[i], klen) && extra[j][klen] == '=';
        if (!overridden) env[n++] = environ[i];
    }
    memmove(env + n, extra, envc * sizeof *env);
    env[n + envc] = NULL;
    return env;
}

static void finish_exec(struct request *rq, pid_t pid, int out_r, int err_r, int in_w, const uint8_t *stdin_data,
                        uint32_t stdin_len) {
    struct reply r = {.out.cap = rq->cap, .err.cap = rq->cap};
    cmd_child = (struct child){.pid = pid};
    if (in_w >= 0) set_nonblock(in_w);
    struct pump p = {.child = &cmd_child, .out_fd = out_r, .err_fd = err_r, .out = &r.out, .err = &r.err,
                     .feed_fd = in_w, .feed = stdin_data, .feed_left = stdin_len, .done_fd = -1};
    if (in_w >= 0 && !stdin_len) close_fd(&p.feed_fd);
    bool finished = pump(&p, now_ms() + rq->timeout_ms);
    if (!finished) kill_all();
    int code = finished ? cmd_child.code : -SIGKILL;
    cmd_child = (struct child){0};
    r.exit_code = code < 0 ? 128 - code : code;
    r.timed_out = !finished;
    send_reply(&r);
}

/* A pipe for the stdin the request gives, else /dev/null; nonzero on failure (errno). */
static int open_stdin(bool given, int in[2]) {
    if (given) return pipe2(in, O_CLOEXEC);
    in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return in[0] < 0;
}

static void do_exec(struct request *rq, struct arena *a) {
    struct cursor *c = &rq->c;
    uint8_t flags = get_u8(c);
    char *cwd = get_str(c, a);
    uint32_t argc = get_u32(c);
    if (c->bad || argc == 0 || argc > MAX_ITEMS) return send_error(rq->cap, 126, "resident: malformed exec request\n");
    char **argv = calloc(argc + 1, sizeof *argv);
    if (!argv) return send_error(rq->cap, 126, "resident: out of memory\n");
    for (uint32_t i = 0; i < argc; i++) argv[i] = get_str(c, a);
    char **env = merged_env(c, a);
    uint32_t stdin_len;
    const uint8_t *stdin_data = get_bytes(c, &stdin_len);
    if (c->bad || !env || c->left) {
        free(argv);
        free(env);
        return send_error(rq->cap, 126, "resident: malformed exec request\n");
    }
    char found[4096];
    const char *path = which(argv[0], env, found, sizeof found);
    int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1};
    pid_t pid = 0;
    int rc;
    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || open_stdin(flags & 1, in)) rc = errno;
    else if (!path) rc = -1;
    else if (chdir(*cwd ? cwd : "/workspace")) {
        /* chdir here, not in the child: a missing folder is said as such, not as the program. */
        rc = errno;
        path = *cwd ? cwd : "/workspace";
    } else {
        rc = spawn(&pid, path, argv, env, (int[3]){in[0], out[1], err[1]}, -1);
        back_to_root();
    }
    close_fd(&out[1]), close_fd(&err[1]), close_fd(&in[0]);
    if (rc) {
        close_fd(&out[0]), close_fd(&err[0]), close_fd(&in[1]);
        if (rc < 0) send_error(rq->cap, 127, "%s: command not found\n", argv[0]);
        else send_error(rq->cap, 127, "%s: %s\n", path ? path : argv[0], strerror(rc));
    } else {
        finish_exec(rq, pid, out[0], err[0], in[1], stdin_data, stdin_len);
    }
    free(argv);
    free(env);
}

/* ---- Python cells ------------------------------------------------------------------------ */

static struct {
    int sock;
    char id[64];
    const char *lost; /* why the last kernel went, said once to the next cell */
    unsigned long cells;
} kernel = {.sock = -1, .lost = ""};

static void stop_kernel(void) {
    if (!kernel_child.pid) return;
    close_fd(&kernel.sock);
    killpg(kernel_child.pid, SIGKILL);
    wait_for(&kernel_child);
    kernel_child = (struct child){0};
}

static int start_kernel(void) {
    int sv[2];
    char found[4096];
    const char *python = which("python3", environ, found, sizeof found);
    if (!python) return ENOENT;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) return errno;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    char *argv[] = {(char *)python, (char *)kernel_script, NULL};
    pid_t pid;
    int rc = chdir("/workspace") ? errno : spawn(&pid, python, argv, environ, (int[3]){null, null, null}, sv[1]);
    back_to_root();
    close(null);
    close(sv[1]);
    if (rc) {
        close(sv[0]);
        return rc;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(kernel.id, sizeof kernel.id, "k%d-%lld%09ld", (int)pid, (long long)ts.tv_sec, ts.tv_nsec);
    kernel.sock = sv[0];
    kernel.lost = "";
    kernel_child = (struct child){.pid = pid};
    return 0;
}

/* Hands the kernel a cell: its code, stdout and stderr pipes as SCM_RIGHTS. */
static bool send_cell(int fds[3]) {
    char msg[48];
    int len = snprintf(msg, sizeof msg, "{\"cell\": %lu}", ++kernel.cells);
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(3 * sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {msg, (size_t)len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET, cm->cmsg_type = SCM_RIGHTS, cm->cmsg_len = CMSG_LEN(3 * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, 3 * sizeof(int));
    return sendmsg(kernel.sock, &mh, MSG_NOSIGNAL) == len;
}

static void do_python(struct request *rq) {
    struct cursor *c = &rq->c;
    uint8_t flags = get_u8(c);
    uint32_t id_len, code_len;
    const uint8_t *id = get_bytes(c, &id_len), *code = get_bytes(c, &code_len);
    if (c->bad || c->left) return send_error(rq->cap, 126, "resident: malformed python request\n");
    struct reply r = {.out.cap = rq->cap, .err.cap = rq->cap, .restarted = ""};
    if (kernel_child.pid && kernel_child.done) {
        /* Killed between cells (a command's timeout sweep, the memory limit, ...). */
        close_fd(&kernel.sock);
        kernel_child = (struct child){0};
        kernel.lost = "killed";
    }
    bool same = kernel_child.pid && id_len == strlen(kernel.id) && !memcmp(id, kernel.id, id_len);
    if ((flags & 1) || !same) {
        r.restarted = *kernel.lost ? kernel.lost : (flags & 1) ? "reset" : "new";
        stop_kernel();
        int rc = start_kernel();
        if (rc) return send_error(rq->cap, 127, "resident: cannot start python3 (%s)\n", strerror(rc));
    }
    int code_p[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    uint8_t *answer = malloc(KERNEL_REPLY_MAX);
    bool sent = false;
    if (answer && !pipe2(code_p, O_CLOEXEC) && !pipe2(out, O_CLOEXEC) && !pipe2(err, O_CLOEXEC))
        sent = send_cell((int[3]){code_p[0], out[1], err[1]});
    close_fd(&code_p[0]), close_fd(&out[1]), close_fd(&err[1]);
    bool finished = true;
    struct pump p = {.answer = answer};
    if (sent) {
        set_nonblock(code_p[1]);
        p = (struct pump){.child = &kernel_child, .out_fd = out[0], .err_fd = err[0], .out = &r.out, .err = &r.err,
                          .feed_fd = code_p[1], .feed = code, .feed_left = code_len, .done_fd = kernel.sock,
                          .answer = answer};
        if (!code_len) close_fd(&p.feed_fd);
        finished = pump(&p, now_ms() + rq->timeout_ms);
    } else {
        close_fd(&code_p[1]), close_fd(&out[0]), close_fd(&err[0]);
    }
    if (finished && p.answer_len) {
        r.kernel_reply = answer, r.kernel_reply_len = p.answer_len;
    } else {
        stop_kernel();
        kernel.lost = finished ? "crashed" : "timeout";
        r.exit_code = 137, r.timed_out = !finished;
    }
    r.kernel_id = kernel_child.pid ? kernel.id : "";
    send_reply(&r);
    free(answer);
}

/* ---- the model gateway forwarder (a thread: it outlives every kill(-1) sweep) ---------- */

static struct sockaddr_un gw_addr;

static void gw_close_pair(struct pollfd *pf, size_t *n, size_t i) {
    size_t a = ((i - 1) & ~(size_t)1) + 1; /* pairs sit at (1 + 2k, 2 + 2k) */
    close(pf[a].fd);
    close(pf[a + 1].fd);
    pf[a] = pf[*n - 2];
    pf[a + 1] = pf[*n - 1];
    *n -= 2;
}

static void gw_accept(int listener, struct pollfd *pf, size_t *n) {
    int client = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (client < 0) return;
    int up = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*n + 2 > 1 + 2 * GW_MAX_PAIRS || up < 0 || connect(up, (struct sockaddr *)&gw_addr, sizeof gw_addr)) {
        /* No gateway (yet), or too many connections: a reset, not a hang. */
        close(client);
        if (up >= 0) close(up);
        return;
    }
    pf[(*n)++] = (struct pollfd){.fd = client, .events = POLLIN};
    pf[(*n)++] = (struct pollfd){.fd = up, .events = POLLIN};
}

static bool send_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        /* loopback and a local socket: short blocking writes */
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w, n -= (size_t)w;
    }
    return true;
}

static void *gateway_main(void *arg) {
    static struct pollfd pf[1 + 2 * GW_MAX_PAIRS];
    static uint8_t buf[CHUNK];
    size_t n = 1;
    pf[0] = (struct pollfd){.fd = (int)(intptr_t)arg, .events = POLLIN};
    for (;;) {
        if (poll(pf, n, -1) < 0) continue;
        for (size_t i = n; i-- > 1;) {
            if (i >= n || !pf[i].revents) continue; /* i past the end: its pair just closed */
            size_t peer = (i % 2) ? i + 1 : i - 1;
            /* Non-blocking: a pair moved into a closed one's place may be seen twice. */
            ssize_t r = recv(pf[i].fd, buf, sizeof buf, MSG_DONTWAIT);
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (r > 0 && send_all(pf[peer].fd, buf, (size_t)r)) continue;
            gw_close_pair(pf, &n, i);
        }
        if (pf[0].revents) gw_accept(pf[0].fd, pf, &n);
    }
    return NULL;
}

/* Listen now (so the first program finds the port open), forward on a thread. */
static void start_gateway(int port, const char *path) {
    if (strlen(path) >= sizeof gw_addr.sun_path) die("gateway path");
    gw_addr.sun_family = AF_UNIX;
    strcpy(gw_addr.sun_path, path);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (s < 0 || bind(s, (struct sockaddr *)&in, sizeof in) || listen(s, 64)) die("gateway listen");
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024); /* its buffers are static */
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, gateway_main, (void *)(intptr_t)s)) die("gateway thread");
    pthread_attr_destroy(&attr);
}

/* ---- serving ----------------------------------------------------------------------------- */

static void handle(uint8_t *body, uint32_t len) {
    struct request rq = {.c = {body, len, false}};
    rq.op = get_u8(&rq.c);
    rq.cap = get_u32(&rq.c);
    rq.timeout_ms = get_u32(&rq.c);
    if (rq.cap > MAX_CAP) rq.cap = MAX_CAP;
    if (rq.c.bad) return send_error(4096, 126, "resident: malformed request\n");
    if (rq.op == 2) return do_python(&rq);
    if (rq.op != 1) return send_error(rq.cap, 126, "resident: unknown operation %u\n", rq.op);
    /* Every string is shorter than the request, with one NUL each (4 length bytes apiece). */
    struct arena a = {.base = malloc((size_t)len + len / 4 + 1), .size = (size_t)len + len / 4 + 1};
    if (!a.base) return send_error(rq.cap, 126, "resident: out of memory\n");
    do_exec(&rq, &a);
    free(a.base);
}

static void serve(void) {
    struct pollfd pf[2 + MAX_DRAINS];
    for (;;) {
        pf[0] = (struct pollfd){.fd = CTL_IN, .events = POLLIN};
        pf[1] = (struct pollfd){.fd = sigfd, .events = POLLIN};
        size_t nd = poll_drains(pf + 2);
        /* No timeout: a request, or a child's exit (an orphan to reap as PID 1). */
        if (poll(pf, 2 + nd, -1) < 0 && errno != EINTR) die("poll");
        serve_drains(pf + 2, nd);
        if (pf[1].revents) reap();
        if (!pf[0].revents) continue;
        uint8_t head[4];
        if (!read_all(CTL_IN, head, 4)) return;
        uint32_t len = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
        uint8_t *body = len <= MAX_REQUEST ? malloc(len ? len : 1) : NULL;
        if (!body) die("request size"); /* the channel is out of step: start over */
        if (!read_all(CTL_IN, body, len)) return;
        handle(body, len);
        free(body);
    }
}

/*
 * `resident --init`: a container's PID 1 (Docker), in place of a shell loop. It reaps what
 * is reparented to it and never forks: the shell keep-alive forked a `sleep` whenever its
 * last one ended (a timeout's kill(-1) ends it), and a fork refused under a full process
 * cap made the shell, and so the container, exit.
 */
static int init_main(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    for (;;) {
        int sig;
        if (sigwait(&set, &sig)) continue;
        if (sig != SIGCHLD) return 0; /* docker stop */
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
    }
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--init")) return init_main();
    if (argc != 4) die("usage");
    kernel_script = argv[3];
    /* The channel moves to fds 3/4; 0-2 become /dev/null so that nothing stray corrupts it. */
    if (dup2(0, CTL_IN) < 0 || dup2(1, CTL_OUT) < 0) die("fds");
    int null = open("/dev/null", O_RDWR); /* past 4 now: 0-4 are all open */
    if (null < 0) die("/dev/null");
    for (int fd = 0; fd < 3; fd++) dup2(null, fd);
    close(null);
    fcntl(CTL_IN, F_SETFD, FD_CLOEXEC);
    fcntl(CTL_OUT, F_SETFD, FD_CLOEXEC);
    signal(SIGPIPE, SIG_IGN); /* a command that stops reading its stdin is no error here */
    /* Orphans of the commands are this process's to reap, as they are where it is PID 1
       (bwrap): in a container PID 1 is the keep-alive, and what it had not reaped yet of a
       timeout's kill still held the process cap when the next command started. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) die("subreaper");
    /* SIGCHLD only through the signalfd: blocked before the gateway thread inherits the mask. */
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sigfd < 0) die("signalfd");
    char folder[sizeof gw_addr.sun_path];
    snprintf(folder, sizeof folder, "%s", argv[2]);
    char *slash = strrchr(folder, '/');
    if (slash) *slash = 0;
    if (slash && is_dir(folder)) start_gateway(atoi(argv[1]), argv[2]);
    /* Before reading anything: a host that never sees this knows no request ran here. */
    uint8_t hello[12] = {0, 0, 0, 8, 'A', 'S', 'R', 'S'};
    put_u32(hello + 8, PROTO_VERSION);
    write_all(CTL_OUT, hello, sizeof hello);
    serve();
    return 0;
}
