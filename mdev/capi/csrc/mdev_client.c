/*
 * mdev_client.c -- libmdev_client.so: where every C entry point's mdev_call goes.
 *
 *   the default, or MDEV_CAPI=agent (a host agent serves the calls; this file)
 *     C thread --> mdev_call --> its slot of a shared area (mdev/capi/channel.py):
 *                                name, argument letters, arguments; state CALL, futex wake
 *              <-- the agent (python -m mdev.capi.agent, mdev's own interpreter, one per C
 *                  process, one agent thread per calling C thread) runs the call on
 *                  mdev.runtime and answers DONE; mid-call it may ask this thread for a
 *                  service (map a pinned segment at the same address, run a C function)
 *     The calling process's Python, if it has one, is never touched: no GIL is taken.
 *   an asynchronous call (its face's spec, mdev.capi.asynchronous) whose arguments pass the
 *   spec's checks against the grants the agent wrote into the slot: appended to the slot's
 *   ring and answered ACL_SUCCESS at once; the agent runs the ring before the next CALL.
 *   An aclnn operator's run also takes its executor's grant (the area's table: any thread's).
 *   MDEV_CAPI=embedded, or a Python program running mdev's runtime itself (mdev.acl
 *   imported: MDEV_RUNTIME_PID is its pid): libmdev_embed.so runs the calls in that
 *   interpreter (or one it starts), sharing the program's runtime.
 *
 * Session: the first call starts the agent (double fork + exec, so it is no child to wait
 * for), hands it the area (a memfd) and a lifeline pipe whose end it reads: when this
 * process exits or dies the agent sees EOF, releases what the process held and exits.
 * exit() waits for that, so a trace or a report is written when the program returns.
 * fork(): the child forgets the parent's session (its first call starts its own agent).
 * The agent's death is seen through a pidfd: calls then fail with the library's internal
 * error instead of waiting.  Host callbacks run on service threads of this process.
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mdev_config.h"
#include "mdev_embed.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

extern char** environ;

typedef void (*vcall_fn)(mdev_face*, int, uint64_t, mdev_result*, const char*, const char*, va_list);

enum { UNDECIDED, EMBEDDED, AGENT };
static int mode = UNDECIDED;
static vcall_fn embedded_call;
static pthread_once_t decided = PTHREAD_ONCE_INIT;

static struct {
    unsigned char* area;     /* the shared area, NULL without a session */
    int lifeline;            /* write end: the agent reads EOF when this process is gone */
    int pidfd;
    pid_t agent;
    pid_t owner;             /* the process the session is for (a forked child has none) */
    int dead;                /* the agent is gone: calls fail at once */
    int failed;              /* it could not be started: said once */
    unsigned generation;     /* bumped in a forked child: threads' slots are the parent's */
} S;
static pthread_mutex_t session_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int holding;       /* this thread holds session_lock (starting the agent forks) */
static pthread_key_t slot_key;
static __thread int my_slot = -1;
static __thread int serving;       /* this thread runs a C function the agent asked for */
static __thread unsigned my_generation;

#define SPIN_NS 200000             /* how long a C thread watches for the answer before sleeping */
#define PAUSE_NS 20000             /* ... the first of it without yielding the CPU */
#define U32(base, off) ((_Atomic uint32_t*)((base) + (off)))
#define C_SLEEPS(slot) U32(slot, MDEV_CH_S_C_SLEEPS)
#define AGENT_SLEEPS(slot) U32(slot, MDEV_CH_S_AGENT_SLEEPS)
#define U64(base, off) ((uint64_t*)((base) + (off)))
#define STATE(slot) U32(slot, MDEV_CH_S_STATE)
#define DOORBELL(slot) U32(slot, MDEV_CH_S_DOORBELL)

static unsigned char* slot_at(int index)
{
    return S.area + MDEV_CH_HEADER_BYTES + (size_t)index * MDEV_CH_SLOT_BYTES;
}

static void futex_wake(_Atomic uint32_t* word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

static void futex_wait(_Atomic uint32_t* word, uint32_t seen, long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0);
}

static long elapsed_ns(const struct timespec* since)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - since->tv_sec) * 1000000000L + (t.tv_nsec - since->tv_nsec);
}

/* The word's value once it is no longer ``seen``: watched for ``spin_ns`` (the other side
 * usually answers within microseconds, and sleeping costs a wake-up of the scheduler), then
 * slept on for up to ``timeout_ms`` with ``*sleeps`` set, so that mdev_post wakes it;
 * ``seen`` again when that passes.  The agent waits with it too (through ctypes, which lets
 * go of the GIL meanwhile). */
__attribute__((visibility("default"))) uint32_t mdev_wait_change(_Atomic uint32_t* word, uint32_t seen, long spin_ns,
                                                                  long timeout_ms, _Atomic uint32_t* sleeps)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    long spent = 0;
    for (unsigned spin = 1;; spin++) {
        uint32_t now = atomic_load(word);
        if (now != seen) {
            return now;
        }
        if ((spin & 63) == 0 && (spent = elapsed_ns(&start)) > spin_ns) {
            break;
        }
        if (spent > PAUSE_NS) {
            sched_yield();        /* past the first microseconds each look lets a busy CPU go */
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    atomic_store(sleeps, 1);
    if (atomic_load(word) == seen) {      /* a post after this sees the flag and wakes */
        futex_wait(word, seen, timeout_ms);
    }
    atomic_store(sleeps, 0);
    return atomic_load(word);
}

/* Store ``value`` into the word, waking the other side if it sleeps on it. */
__attribute__((visibility("default"))) void mdev_post(_Atomic uint32_t* word, uint32_t value,
                                                      _Atomic uint32_t* peer_sleeps)
{
    atomic_store(word, value);
    if (atomic_load(peer_sleeps)) {
        futex_wake(word);
    }
}

/* ``state`` stored, and the slot's doorbell rung: the agent's thread, idle on the doorbell or
 * waiting on the state mid-call, sees it (woken only if it sleeps) */
static void announce(unsigned char* slot, uint32_t state)
{
    atomic_store(STATE(slot), state);
    atomic_fetch_add(DOORBELL(slot), 1);
    if (atomic_load(AGENT_SLEEPS(slot))) {
        futex_wake(DOORBELL(slot));
        futex_wake(STATE(slot));
    }
}

static int agent_alive(void)
{
    if (S.dead) {
        return 0;
    }
    struct pollfd p = {S.pidfd, POLLIN, 0};
    if (S.pidfd >= 0 && poll(&p, 1, 0) == 1) {
        S.dead = 1;
        if (S.lifeline >= 0) {     /* not when this process's exit let it go (its threads still look) */
            fprintf(stderr, "mdev: the host agent (pid %d) is gone: API calls fail from now on\n", (int)S.agent);
        }
    }
    return !S.dead;
}

/* ------------------------------------------------------------------ services for the agent */
static int claim(uint32_t role);

static void* service_thread(void* arg);

static uint64_t serve(unsigned char* slot)
{
    uint64_t kind = *U64(slot, MDEV_CH_S_KIND);
    uint64_t* a = U64(slot, MDEV_CH_S_ARGS);
    void* at = (void*)(uintptr_t)a[0];
    size_t size = (size_t)a[1];
    switch (kind) {
    case MDEV_CH_K_CALL: {
        /* any C function of up to 6 integer or pointer arguments (callbacks take those) */
        uint64_t (*fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t) =
            (uint64_t (*)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t))(uintptr_t)a[0];
        return fn(a[1], a[2], a[3], a[4], a[5], a[6]);
    }
    case MDEV_CH_K_MAP: {
        char path[300];
        snprintf(path, sizeof path, "/dev/shm/%s", (const char*)slot + MDEV_CH_S_DATA);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            return (uint64_t)errno;
        }
        void* got = mmap(at, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
        int err = got == MAP_FAILED ? errno : 0;
        close(fd);
        return (uint64_t)err;
    }
    case MDEV_CH_K_RESERVE:
        return mmap(at, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0)
               == MAP_FAILED ? (uint64_t)errno : 0;
    case MDEV_CH_K_PRIVATE: {            /* the pages become private again, with their contents */
        void* keep = malloc(size ? size : 1);
        if (keep == NULL) {
            return ENOMEM;
        }
        memcpy(keep, at, size);
        int err = mmap(at, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
                  == MAP_FAILED ? errno : 0;
        if (!err) {
            memcpy(at, keep, size);
        }
        free(keep);
        return (uint64_t)err;
    }
    case MDEV_CH_K_SPAWN: {
        int index = claim(MDEV_CH_SERVICE_ROLE);
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int err = index < 0 ? EAGAIN : pthread_create(&thread, &attr, service_thread, (void*)(intptr_t)index);
        pthread_attr_destroy(&attr);
        return err ? (uint64_t)-1 : (uint64_t)index;
    }
    default:
        return (uint64_t)EINVAL;
    }
}

/* a thread that runs what the agent asks (host callbacks); its signals stay the program's */
static void* service_thread(void* arg)
{
    int index = (int)(intptr_t)arg;
    unsigned generation = S.generation;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    for (;;) {
        if (S.generation != generation || S.area == NULL) {
            return NULL;
        }
        unsigned char* slot = slot_at(index);
        _Atomic uint32_t* state = U32(slot, MDEV_CH_S_STATE);
        uint32_t now = atomic_load(state);
        if (now == MDEV_CH_SERVICE) {
            *U64(slot, MDEV_CH_S_RESULT) = serve(slot);
            mdev_post(state, MDEV_CH_SERVED, AGENT_SLEEPS(slot));
        } else if (now == MDEV_CH_CLOSED || !agent_alive()) {
            return NULL;
        } else {
            mdev_wait_change(state, now, 0, 1000, C_SLEEPS(slot));
        }
    }
}

/* ------------------------------------------------------------------ the session */
static void thread_gone(void* unused)
{
    (void)unused;
    if (my_slot >= 0 && my_generation == S.generation && S.area != NULL) {
        unsigned char* slot = slot_at(my_slot);
        announce(slot, MDEV_CH_CLOSED);           /* its ring is run first */
    }
    my_slot = -1;
}

/* a free slot for this process's thread, announced to the agent; -1 when all are taken */
static int claim(uint32_t role)
{
    for (int i = 0; i < (int)MDEV_CH_SLOTS; i++) {
        unsigned char* slot = slot_at(i);
        uint32_t free_state = MDEV_CH_FREE;
        if (atomic_compare_exchange_strong(U32(slot, MDEV_CH_S_STATE), &free_state, MDEV_CH_OPENING)) {
            *U64(slot, MDEV_CH_S_THREAD) = (uint64_t)pthread_self();
            atomic_store(U32(slot, MDEV_CH_S_GRANT_EPOCH), 0);     /* the last thread's grants are void */
            atomic_store(U32(slot, MDEV_CH_S_ROLE), role);
            atomic_store(U32(slot, MDEV_CH_S_STATE), MDEV_CH_IDLE);
            atomic_fetch_add(U32(S.area, MDEV_CH_H_OPENED), 1);
            futex_wake(U32(S.area, MDEV_CH_H_OPENED));
            return i;
        }
    }
    return -1;
}

static void at_exit(void)
{
    if (S.area == NULL || S.owner != getpid() || S.dead) {
        return;
    }
    int lifeline = S.lifeline;
    S.lifeline = -1;
    close(lifeline);                         /* the agent releases this process's resources... */
    struct pollfd p = {S.pidfd, POLLIN, 0};
    while (poll(&p, 1, 60000) < 0 && errno == EINTR) {
    }                                        /* ...and is waited for: its reports are written */
}

/* fork() from any thread waits until no session is being started (unless it is that start) */
static __thread int locked_for_fork;

static void before_fork(void)
{
    locked_for_fork = !holding;
    if (locked_for_fork) {
        pthread_mutex_lock(&session_lock);
    }
}

static void after_fork_parent(void)
{
    if (locked_for_fork) {
        pthread_mutex_unlock(&session_lock);
    }
}

/* the child: the parent's session stays the parent's (mappings are left, never used) */
static void after_fork_child(void)
{
    if (S.area != NULL) {
        close(S.lifeline);
        if (S.pidfd >= 0) {
            close(S.pidfd);
        }
    }
    S.area = NULL;
    S.lifeline = S.pidfd = -1;
    S.agent = 0;
    S.owner = 0;
    S.dead = S.failed = 0;
    S.generation++;
    my_slot = -1;
    pthread_mutex_init(&session_lock, NULL);
    holding = 0;
}

static void fail_start(const char* what)
{
    if (!S.failed) {
        fprintf(stderr, "mdev: cannot start the host agent: %s\n", what);
    }
    S.failed = 1;
}

/* the agent's environment: the program's, without the Python settings of another interpreter */
static char** agent_environ(void)
{
    size_t n = 0;
    while (environ[n] != NULL) {
        n++;
    }
    char** env = calloc(n + 2, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; env != NULL && i < n; i++) {
        if (strncmp(environ[i], "PYTHONHOME=", 11) && strncmp(environ[i], "PYTHONPATH=", 11)
            && strncmp(environ[i], "VIRTUAL_ENV=", 12) && strncmp(environ[i], "PYTHONSTARTUP=", 14)) {
            env[k++] = environ[i];
        }
    }
    return env;
}

static int move_fd(int fd)
{
    return fcntl(fd, F_DUPFD, 10);
}

/* Start the agent and hand it the area; on failure everything made is undone (the calls then
 * return their library's internal error, the reason said once on stderr). */
static void start_session(void)
{
    const char* python = getenv("MDEV_PYTHON");
    if (python == NULL || !*python) {
        python = MDEV_PYTHON;
    }
    const char* why = NULL;
    char why_agent[MDEV_CH_ERROR_BYTES + 64];
    int memfd = -1, pipefd[2] = {-1, -1}, high_area = -1, high_life = -1, pidfd = -1;
    unsigned char* area = MAP_FAILED;
    void* window = MAP_FAILED;
    char** env = NULL;
    memfd = memfd_create("mdev-agent", MFD_CLOEXEC);
    if (memfd < 0 || ftruncate(memfd, (off_t)MDEV_CH_AREA_BYTES) != 0
        || (area = mmap(NULL, MDEV_CH_AREA_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0)) == MAP_FAILED) {
        why = strerror(errno);
        goto undo;
    }
    /* the window: far below where either process's libraries and heaps are mapped, so the
       agent (a fresh process) finds the same addresses free */
    for (uintptr_t k = 2; k < 7 && window == MAP_FAILED; k++) {
        window = mmap((void*)(k << 44), MDEV_CH_WINDOW_BYTES, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    }
    if (window == MAP_FAILED || pipe2(pipefd, O_CLOEXEC) != 0) {
        why = strerror(errno);
        goto undo;
    }
    *U64(area, MDEV_CH_H_WINDOW) = (uint64_t)(uintptr_t)window;
    *U64(area, MDEV_CH_H_WINDOW_SIZE) = MDEV_CH_WINDOW_BYTES;
    *U64(area, MDEV_CH_H_CLIENT_AREA) = (uint64_t)(uintptr_t)area;
    char client[32];
    snprintf(client, sizeof client, "%d", (int)getpid());
    Dl_info self;
    const char* library = dladdr((void*)&mdev_wait_change, &self) && self.dli_fname ? self.dli_fname : "";
    char* argv[] = {(char*)python, "-E", "-s", "-c",
                    "import sys; sys.path.insert(0, sys.argv[1]); from mdev.capi import agent; agent.main()",
                    MDEV_ROOT, client, (char*)library, NULL};
    env = agent_environ();
    high_area = move_fd(memfd);
    high_life = move_fd(pipefd[0]);
    if (env == NULL || high_area < 0 || high_life < 0) {
        why = "out of memory or descriptors";
        goto undo;
    }
    pid_t middle = fork();
    if (middle == 0) {
        /* only async-signal-safe calls from here to exec: the program may have threads */
        pid_t agent = fork();
        if (agent != 0) {              /* told before the start is waited for */
            *(_Atomic int32_t*)(area + MDEV_CH_H_AGENT_PID) = (int32_t)agent;
            _exit(0);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        dup2(high_area, 3);
        dup2(high_life, 4);
        if (syscall(SYS_close_range, 5U, ~0U, 0U) != 0) {
            for (int fd = 5; fd < 4096; fd++) {
                close(fd);
            }
        }
        execve(python, argv, env);
        static const char cannot[] = "cannot run the interpreter (MDEV_PYTHON)";
        memcpy(area + MDEV_CH_H_ERROR, cannot, sizeof cannot);
        atomic_store(U32(area, MDEV_CH_H_READY), 2);
        futex_wake(U32(area, MDEV_CH_H_READY));
        _exit(127);
    }
    if (middle < 0) {
        why = strerror(errno);
        goto undo;
    }
    while (waitpid(middle, NULL, 0) < 0 && errno == EINTR) {
    }
    pid_t agent = *(_Atomic int32_t*)(area + MDEV_CH_H_AGENT_PID);
    pidfd = (int)syscall(SYS_pidfd_open, agent, 0);
    _Atomic uint32_t* ready = U32(area, MDEV_CH_H_READY);
    for (int waited = 0; atomic_load(ready) == 0 && waited < 600; waited++) {
        struct pollfd p = {pidfd, POLLIN, 0};
        if (pidfd >= 0 && poll(&p, 1, 0) == 1) {
            break;
        }
        futex_wait(ready, 0, 200);
    }
    if (atomic_load(ready) != 1) {
        snprintf(why_agent, sizeof why_agent, "%s (interpreter %s, mdev at %s)",
                 area[MDEV_CH_H_ERROR] ? (const char*)area + MDEV_CH_H_ERROR : "it exited or did not answer",
                 python, MDEV_ROOT);
        why = why_agent;
        goto undo;           /* the lifeline closed: an agent still starting ends by itself */
    }
    free(env);
    close(high_area);
    close(high_life);
    close(memfd);
    close(pipefd[0]);
    S.area = area;
    S.lifeline = pipefd[1];
    S.pidfd = pidfd;
    S.agent = agent;
    S.owner = getpid();
    S.dead = 0;
    static int once;
    if (!once) {
        once = 1;
        atexit(at_exit);
    }
    int spawner = claim(MDEV_CH_SPAWNER);
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_create(&thread, &attr, service_thread, (void*)(intptr_t)spawner);
    pthread_attr_destroy(&attr);
    return;
undo:
    fail_start(why);
    free(env);
    int fds[] = {memfd, pipefd[0], pipefd[1], high_area, high_life, pidfd};
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    if (window != MAP_FAILED) {
        munmap(window, MDEV_CH_WINDOW_BYTES);
    }
    if (area != MAP_FAILED) {
        munmap(area, MDEV_CH_AREA_BYTES);
    }
}

/* this thread's slot in a live session, or NULL */
static unsigned char* my_slot_of_session(void)
{
    if (my_slot >= 0 && my_generation == S.generation && S.area != NULL) {
        return slot_at(my_slot);
    }
    pthread_mutex_lock(&session_lock);
    holding = 1;
    if (S.area == NULL && !S.failed) {
        start_session();
    }
    int index = S.area != NULL ? claim(MDEV_CH_CALLER) : -1;
    holding = 0;
    pthread_mutex_unlock(&session_lock);
    if (index < 0) {
        if (S.area != NULL) {
            fprintf(stderr, "mdev: more than %d threads call the API at once\n", (int)MDEV_CH_SLOTS);
        }
        return NULL;
    }
    my_slot = index;
    my_generation = S.generation;
    pthread_setspecific(slot_key, &slot_key);
    return slot_at(index);
}

/* ------------------------------------------------------------------ calls */
static int put(unsigned char* slot, size_t* at, const void* data, size_t size)
{
    if (*at + size > MDEV_CH_S_TEXT) {
        return 0;
    }
    memcpy(slot + *at, data, size);
    *at += (size + 7) & ~(size_t)7;
    return 1;
}

static int encode(unsigned char* slot, const char* format, va_list* args)
{
    size_t at = MDEV_CH_S_DATA;
    for (const char* letter = format; *letter; letter++) {
        uint64_t w;
        int64_t n;
        const char* bytes = NULL;
        switch (*letter) {
        case 'i':
            w = (uint64_t)va_arg(*args, long long);
            break;
        case 'u':
        case 'p':
            w = va_arg(*args, unsigned long long);
            break;
        case 'f': {
            double d = va_arg(*args, double);
            memcpy(&w, &d, sizeof w);
            break;
        }
        case 's':
            bytes = va_arg(*args, const char*);
            n = bytes != NULL ? (int64_t)strlen(bytes) : -1;
            if (!put(slot, &at, &n, 8) || (n > 0 && !put(slot, &at, bytes, (size_t)n))) {
                return 0;
            }
            continue;
        case 'b':
            bytes = va_arg(*args, const char*);
            n = (int64_t)va_arg(*args, size_t);
            if (!put(slot, &at, &n, 8) || (n > 0 && !put(slot, &at, bytes, (size_t)n))) {
                return 0;
            }
            continue;
        default:
            return 0;
        }
        if (!put(slot, &at, &w, 8)) {
            return 0;
        }
    }
    return 1;
}

static int copy_text(unsigned char* slot, size_t off, size_t room, const char* text)
{
    size_t n = strlen(text);
    if (n >= room) {
        return 0;
    }
    memcpy(slot + off, text, n + 1);
    return 1;
}

/* what a face's entries[index] holds once this session's agent has run the function (a forked
 * child's agent is another one) */
static void* known_marker(void)
{
    return (void*)(uintptr_t)(S.generation + 1);
}

static void agent_call(mdev_face* face, int index, mdev_result* result, const char* outputs,
                       const char* format, va_list* args)
{
    unsigned char* slot = my_slot_of_session();
    if (slot == NULL || !agent_alive()) {
        return;
    }
    const char* name = face->names[index];
    if (!copy_text(slot, MDEV_CH_S_NAME, MDEV_CH_NAME_BYTES, name)
        || !copy_text(slot, MDEV_CH_S_FORMAT, MDEV_CH_FORMAT_BYTES, format)
        || !copy_text(slot, MDEV_CH_S_OUTPUTS, MDEV_CH_OUTPUTS_BYTES, outputs) || !encode(slot, format, args)) {
        fprintf(stderr, "mdev: %s: its arguments do not fit the agent's channel\n", name);
        return;
    }
    *U64(slot, MDEV_CH_S_FACE) = (uint64_t)(uintptr_t)face;
    *U32(slot, MDEV_CH_S_INDEX) = (uint32_t)index;
    _Atomic uint32_t* state = STATE(slot);
    announce(slot, MDEV_CH_CALL);
    for (int spin = 0;; spin++) {
        uint32_t now = atomic_load(state);
        if (now == MDEV_CH_DONE) {
            break;
        }
        if (now == MDEV_CH_SERVICE) {
            serving++;
            uint64_t served = serve(slot);       /* it may call the API: nested, same slot */
            serving--;
            *U64(slot, MDEV_CH_S_RESULT) = served;
            mdev_post(state, MDEV_CH_SERVED, AGENT_SLEEPS(slot));
            continue;
        }
        if (mdev_wait_change(state, now, spin < 1 ? SPIN_NS : 0, 1000, C_SLEEPS(slot)) == now && !agent_alive()) {
            return;
        }
    }
    if (*U32(slot, MDEV_CH_S_OK)) {
        result->ret = *U64(slot, MDEV_CH_S_RET);
        result->stored = (int)*U32(slot, MDEV_CH_S_STORED);
        memcpy(result->out, U64(slot, MDEV_CH_S_OUT), sizeof result->out);
        face->entries[index] = known_marker();   /* this session's agent knows it: ring entries may name it */
    }
    if (!serving) {                              /* nested: the service's answer comes next */
        atomic_store(state, MDEV_CH_IDLE);
    }
}

/* ------------------------------------------------------------------ asynchronous calls */
/* the device of the granted stream ``handle`` (its process: *pid), or -1; -1 too when its
 * context stops on failure and a failed task stopped it (the failure word the device writes
 * into its control page, which streams.submit reads too): the synchronous call is refused
 * with the failure code */
static int granted_stream(const unsigned char* slot, uint64_t handle, pid_t* pid)
{
    for (int i = 0; i < (int)MDEV_CH_STREAM_GRANTS; i++) {
        const unsigned char* g = slot + MDEV_CH_S_STREAMS + 16 * i;
        uint32_t device = *(const uint32_t*)(g + 8);
        if (device && *(const uint64_t*)g == handle) {
            const _Atomic int64_t* stop = (const _Atomic int64_t*)(uintptr_t)*U64(slot, MDEV_CH_S_STOPS + 8 * i);
            *pid = (pid_t)*(const uint32_t*)(g + 12);
            return stop != NULL && atomic_load(stop) != 0 ? -1 : (int)device - 1;
        }
    }
    return -1;
}

/* A pidfd of device process ``pid`` (which serves device index ``device``), kept per device;
 * -1 when none can be had (the process is gone, or too many devices). */
static struct {
    _Atomic pid_t pid;
    _Atomic int fd;
} device_fds[MDEV_CH_DEVICE_FDS];
static pthread_mutex_t device_fds_lock = PTHREAD_MUTEX_INITIALIZER;

static int device_fd(int device, pid_t pid)
{
    if (device < 0 || device >= (int)MDEV_CH_DEVICE_FDS) {
        return -1;
    }
    if (atomic_load(&device_fds[device].pid) == pid) {
        return atomic_load(&device_fds[device].fd);
    }
    pthread_mutex_lock(&device_fds_lock);
    if (atomic_load(&device_fds[device].pid) != pid) {      /* a restarted device: its new process */
        int had = atomic_load(&device_fds[device].pid) != 0;
        int old = atomic_exchange(&device_fds[device].fd, -1);
        atomic_store(&device_fds[device].pid, 0);
        if (had && old >= 0) {
            close(old);          /* a thread polling it meanwhile gets POLLNVAL: it calls synchronously */
        }
        int fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (fd >= 0) {
            fcntl(fd, F_SETFD, FD_CLOEXEC);
        }
        atomic_store(&device_fds[device].fd, fd);
        atomic_store(&device_fds[device].pid, pid);
    }
    int fd = atomic_load(&device_fds[device].fd);
    pthread_mutex_unlock(&device_fds_lock);
    return fd;
}

/* the agent and the device process ``pid`` both alive (one system call for both): a call to a
 * lost device must answer 507901 at once, which only the synchronous path gives */
static int both_alive(int device, pid_t pid)
{
    int fd = device_fd(device, pid);
    if (fd < 0) {
        return 0;
    }
    struct pollfd p[2] = {{fd, POLLIN, 0}, {S.pidfd, POLLIN, 0}};
    if (poll(p, 2, 0) == 0) {
        return 1;
    }
    if (p[1].revents) {
        agent_alive();         /* says it once */
    }
    return 0;
}

/* [start, start + n) lies in one granted allocation of ``device`` */
static int granted_range(const unsigned char* slot, uint64_t start, uint64_t n, int device)
{
    if (start == 0 || start + n < start) {
        return 0;
    }
    for (int i = 0; i < (int)MDEV_CH_RANGE_GRANTS; i++) {
        const unsigned char* g = slot + MDEV_CH_S_RANGES + 24 * i;
        if (*(const uint32_t*)(g + 16) == (uint32_t)device + 1 && *(const uint64_t*)g <= start
            && start + n <= *(const uint64_t*)(g + 8)) {
            return 1;
        }
    }
    return 0;
}

static int granted_event(const unsigned char* slot, uint64_t handle, int device, uint32_t flags)
{
    for (int i = 0; i < (int)MDEV_CH_EVENT_GRANTS; i++) {
        const unsigned char* g = slot + MDEV_CH_S_EVENTS + 16 * i;
        if (*(const uint32_t*)(g + 8) == (uint32_t)device + 1 && *(const uint64_t*)g == handle
            && (*(const uint32_t*)(g + 12) & flags) == flags) {
            return 1;
        }
    }
    return 0;
}

#define EXECUTOR(area, i) ((area) + MDEV_CH_H_EXECUTORS + 16 * (size_t)(i))

/* The agent's grant of executor ``handle`` for ``device`` at ``epoch`` (mdev.capi.channel),
 * written into an entry that is empty or holds another epoch's grant: 0 when every entry holds
 * one of this epoch.  Called by the agent (its own mapping of the area), which has no CAS. */
__attribute__((visibility("default"))) int mdev_grant_executor(unsigned char* area, uint64_t handle, uint32_t device,
                                                               uint32_t epoch)
{
    for (int i = 0; i < (int)MDEV_CH_EXECUTOR_GRANTS; i++) {
        unsigned char* g = EXECUTOR(area, i);
        _Atomic uint64_t* held = (_Atomic uint64_t*)g;
        uint64_t seen = atomic_load(held);
        if (seen == MDEV_CH_EXECUTOR_WRITING || (seen != 0 && atomic_load(U32(g, 12)) == epoch)
            || !atomic_compare_exchange_strong(held, &seen, MDEV_CH_EXECUTOR_WRITING)) {
            continue;
        }
        atomic_store(U32(g, 8), device + 1);
        atomic_store(U32(g, 12), epoch);
        atomic_store(held, handle);
        return 1;
    }
    return 0;
}

/* executor ``handle`` is granted for ``device`` in this epoch: its grant taken (the run this
 * thread queues uses the executor up); handles are never reused, so the entry read under it
 * is the one taken */
static int take_executor(uint64_t handle, int device)
{
    uint32_t epoch = atomic_load(U32(S.area, MDEV_CH_H_EPOCH));
    for (int i = 0; handle > MDEV_CH_EXECUTOR_WRITING && i < (int)MDEV_CH_EXECUTOR_GRANTS; i++) {
        unsigned char* g = EXECUTOR(S.area, i);
        _Atomic uint64_t* held = (_Atomic uint64_t*)g;
        if (atomic_load(held) == handle) {
            uint64_t seen = handle;
            return atomic_load(U32(g, 8)) == (uint32_t)device + 1 && atomic_load(U32(g, 12)) == epoch
                   && atomic_compare_exchange_strong(held, &seen, 0);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ executors made here */
/* aclnnXGetWorkspaceSize (mdev.capi.local): a signature the agent said passed -- the function,
 * its value arguments, which descriptors are NULL, the descriptors' copy with every tensor's
 * data address zeroed -- is answered here: an executor record in the area (the call's words
 * and copy), whose handle the agent adopts when a call names it.  Its run is queued when every
 * tensor lies in a device allocation the agent granted area-wide for the stream's device. */
#define SIGNATURES 512
#define SIGNATURE_BYTES (16 + 8 * MDEV_CH_LOCAL_WORDS + MDEV_CH_LOCAL_BYTES)
#define RECORD(i) (S.area + MDEV_CH_LOCAL_AT + (size_t)(i) * MDEV_CH_LOCAL_BYTES)
static struct {
    uint64_t hash;
    size_t size;
    unsigned char* bytes;
} signatures[SIGNATURES];
static pthread_mutex_t signatures_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t records_made;
static const unsigned char itemsizes[] = MDEV_NN_ITEMSIZES;

static int made_here(uint64_t handle)
{
    return (handle >> 56) == (MDEV_CH_LOCAL_TAG >> 56);
}

/* one GetWorkspaceSize call: its words (the packed copy apart), its copy, its signature */
typedef struct {
    uint64_t words[MDEV_CH_LOCAL_WORDS];
    int count;
    const unsigned char* packed;
    size_t packed_size;
    uint64_t* workspace_size;
    uint64_t* executor;
    unsigned char signature[SIGNATURE_BYTES];
    size_t size;
    uint64_t hash;
} workspace_call;

/* ``call`` read from the arguments; 0 when its signature cannot be made here (a text argument,
 * descriptors other than tensors and scalars, no copy, NULL outputs, too large) */
static int read_call(mdev_face* face, int index, const char* format, va_list* args, workspace_call* call)
{
    size_t n = strlen(format);
    if (n < 3 || n - 1 > MDEV_CH_LOCAL_WORDS || strcmp(format + n - 3, "ppb") != 0) {
        return 0;
    }
    va_list copy;
    va_copy(copy, *args);
    int ok = 1;
    for (size_t k = 0; ok && k + 1 < n; k++) {
        switch (format[k]) {
        case 'i':
            call->words[k] = (uint64_t)va_arg(copy, long long);
            break;
        case 'u':
        case 'p':
            call->words[k] = va_arg(copy, unsigned long long);
            break;
        case 'f': {
            double d = va_arg(copy, double);
            memcpy(&call->words[k], &d, sizeof d);
            break;
        }
        default:
            ok = 0;
        }
    }
    if (ok) {
        call->packed = va_arg(copy, const unsigned char*);
        call->packed_size = va_arg(copy, size_t);
    }
    va_end(copy);
    call->count = (int)n - 1;
    call->workspace_size = (uint64_t*)(uintptr_t)call->words[n - 3];
    call->executor = (uint64_t*)(uintptr_t)call->words[n - 2];
    if (!ok || call->packed_size == 0 || call->packed_size > MDEV_CH_LOCAL_BYTES - MDEV_CH_L_PACKED
        || call->workspace_size == NULL || call->executor == NULL) {
        return 0;
    }
    unsigned char* sig = call->signature;
    uint64_t head[2] = {(uint64_t)(uintptr_t)face, (uint64_t)index};
    memcpy(sig, head, sizeof head);
    size_t at = sizeof head;
    for (int k = 0; k < call->count - 2; k++) {      /* a descriptor's address: whether it is NULL */
        uint64_t w = format[k] == 'p' ? call->words[k] != 0 : call->words[k];
        memcpy(sig + at, &w, 8);
        at += 8;
    }
    memcpy(sig + at, call->packed, call->packed_size);
    for (size_t d = 0; d < call->packed_size;) {
        uint32_t magic;
        memcpy(&magic, call->packed + d, 4);
        if (magic == MDEV_NN_TENSOR_MAGIC) {
            memset(sig + at + d + MDEV_NN_T_DATA, 0, 8);
            d += MDEV_NN_TENSOR_BYTES;
        } else if (magic == MDEV_NN_SCALAR_MAGIC) {
            d += MDEV_NN_SCALAR_BYTES;
        } else {
            return 0;
        }
    }
    call->size = at + call->packed_size;
    uint64_t h = 1469598103934665603ULL;             /* FNV-1a */
    for (size_t k = 0; k < call->size; k++) {
        h = (h ^ sig[k]) * 1099511628211ULL;
    }
    call->hash = h;
    return 1;
}

static int signature_known(const workspace_call* call)
{
    pthread_mutex_lock(&signatures_lock);
    int i = (int)(call->hash % SIGNATURES);
    int known = signatures[i].hash == call->hash && signatures[i].size == call->size
                && memcmp(signatures[i].bytes, call->signature, call->size) == 0;
    pthread_mutex_unlock(&signatures_lock);
    return known;
}

static void learn_signature(const workspace_call* call)
{
    unsigned char* bytes = malloc(call->size);
    if (bytes == NULL) {
        return;
    }
    memcpy(bytes, call->signature, call->size);
    pthread_mutex_lock(&signatures_lock);
    int i = (int)(call->hash % SIGNATURES);
    free(signatures[i].bytes);                   /* one signature a bucket: the last learnt */
    signatures[i].hash = call->hash;
    signatures[i].size = call->size;
    signatures[i].bytes = bytes;
    pthread_mutex_unlock(&signatures_lock);
}

/* the call answered with an executor record (ACLNN_SUCCESS, workspace size 0); 0 when no
 * record is free */
static int make_record(mdev_face* face, int index, const workspace_call* call, mdev_result* result)
{
    uint64_t count = atomic_fetch_add(&records_made, 1);
    for (int k = 0; k < (int)MDEV_CH_LOCAL_RECORDS; k++) {
        int i = (int)((count + (uint64_t)k) % MDEV_CH_LOCAL_RECORDS);
        unsigned char* r = RECORD(i);
        uint32_t free_state = MDEV_CH_LOCAL_FREE;
        if (!atomic_compare_exchange_strong(U32(r, MDEV_CH_L_STATE), &free_state, MDEV_CH_LOCAL_WRITING)) {
            continue;
        }
        uint64_t handle = MDEV_CH_LOCAL_TAG | ((count & 0xffffffffffULL) << 16) | (uint64_t)i;
        *U32(r, MDEV_CH_L_INDEX) = (uint32_t)index;
        *U64(r, MDEV_CH_L_FACE) = (uint64_t)(uintptr_t)face;
        *U32(r, MDEV_CH_L_WORDS) = (uint32_t)call->count;
        *U32(r, MDEV_CH_L_PACKED_BYTES) = (uint32_t)call->packed_size;
        memcpy(r + MDEV_CH_L_ARGS, call->words, 8 * (size_t)call->count);
        memcpy(r + MDEV_CH_L_PACKED, call->packed, call->packed_size);
        atomic_store((_Atomic uint64_t*)(r + MDEV_CH_L_HANDLE), handle);
        atomic_store(U32(r, MDEV_CH_L_STATE), MDEV_CH_LOCAL_READY);
        result->ret = 0;
        result->stored = 1;
        result->out[0] = 0;
        result->out[1] = handle;
        return 1;
    }
    return 0;
}

/* [start, start + n) lies in a device allocation of ``device`` granted for operator runs in
 * ``epoch`` (each entry read between two equal, even looks at its sequence word) */
static int granted_allocation(uint64_t start, uint64_t n, int device, uint32_t epoch)
{
    for (int i = 0; i < (int)MDEV_CH_ALLOC_GRANTS; i++) {
        unsigned char* g = S.area + MDEV_CH_H_ALLOCS + MDEV_CH_ALLOC_BYTES * (size_t)i;
        uint32_t seq = atomic_load(U32(g, 24));
        if (seq & 1) {
            continue;
        }
        uint64_t low = *U64(g, 0), high = *U64(g, 8);
        uint32_t dev = *U32(g, 16), at = *U32(g, 20);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load(U32(g, 24)) == seq && at == epoch && dev == (uint32_t)device + 1 && low <= start
            && start + n >= start && start + n <= high) {
            return 1;
        }
    }
    return 0;
}

/* every tensor of record ``r``'s copy lies in a granted allocation of ``device`` (a tensor
 * without elements lies nowhere) */
static int record_tensors_granted(const unsigned char* r, int device, uint32_t epoch)
{
    const unsigned char* p = r + MDEV_CH_L_PACKED;
    size_t size = *U32(r, MDEV_CH_L_PACKED_BYTES);
    for (size_t d = 0; d < size;) {
        uint32_t magic;
        memcpy(&magic, p + d, 4);
        if (magic == MDEV_NN_SCALAR_MAGIC) {
            d += MDEV_NN_SCALAR_BYTES;
            continue;
        }
        int32_t dtype;
        uint32_t ndim, strided;
        int64_t offset, shape[MDEV_NN_MAX_DIMS], strides[MDEV_NN_MAX_DIMS];
        uint64_t data;
        memcpy(&dtype, p + d + MDEV_NN_T_DTYPE, 4);
        memcpy(&ndim, p + d + MDEV_NN_T_NDIM, 4);
        memcpy(&strided, p + d + MDEV_NN_T_STRIDED, 4);
        memcpy(&offset, p + d + MDEV_NN_T_OFFSET, 8);
        memcpy(&data, p + d + MDEV_NN_T_DATA, 8);
        memcpy(shape, p + d + MDEV_NN_T_SHAPE, sizeof shape);
        memcpy(strides, p + d + MDEV_NN_T_STRIDES, sizeof strides);
        d += MDEV_NN_TENSOR_BYTES;
        if (dtype < 0 || dtype >= (int32_t)sizeof itemsizes || !itemsizes[dtype] || ndim > MDEV_NN_MAX_DIMS
            || offset < 0) {
            return 0;
        }
        int empty = 0;
        for (uint32_t k = 0; k < ndim; k++) {
            if (shape[k] < 0 || (strided && strides[k] < 0)) {
                return 0;
            }
            empty |= shape[k] == 0;
        }
        if (empty) {
            continue;
        }
        uint64_t last = 0, step = 1;             /* the last element's index (contiguous strides unless given) */
        for (int k = (int)ndim - 1; k >= 0; k--) {
            last += (uint64_t)(shape[k] - 1) * (strided ? (uint64_t)strides[k] : step);
            step *= (uint64_t)shape[k];
        }
        uint64_t size_of = itemsizes[dtype];
        if (!granted_allocation(data + (uint64_t)offset * size_of, (last + 1) * size_of, device, epoch)) {
            return 0;
        }
    }
    return 1;
}

/* record ``handle`` made here, not yet taken, its tensors granted for ``device``: taken (the
 * run this thread queues uses it up; the agent adopts it when it runs) */
static int take_record(uint64_t handle, int device)
{
    uint64_t i = handle & 0xffff;
    if (i >= MDEV_CH_LOCAL_RECORDS) {
        return 0;
    }
    unsigned char* r = RECORD(i);
    uint32_t ready = MDEV_CH_LOCAL_READY;
    return atomic_load((_Atomic uint64_t*)(r + MDEV_CH_L_HANDLE)) == handle
           && atomic_load(U32(r, MDEV_CH_L_STATE)) == MDEV_CH_LOCAL_READY
           && record_tensors_granted(r, device, atomic_load(U32(S.area, MDEV_CH_H_EPOCH)))
           && atomic_compare_exchange_strong(U32(r, MDEV_CH_L_STATE), &ready, MDEV_CH_LOCAL_TAKEN);
}

/* the arguments pass every check of ``spec`` (mdev.capi.asynchronous) against the slot's grants */
static int granted(const unsigned char* slot, const char* spec, const uint64_t* a)
{
    if (atomic_load(U32(slot, MDEV_CH_S_GRANT_EPOCH)) != atomic_load(U32(S.area, MDEV_CH_H_EPOCH))) {
        return 0;
    }
    int device = -1;
    pid_t pid = 0;
    for (int k = 0; spec[2 * k]; k++) {
        if (spec[2 * k] == 's' && (device = granted_stream(slot, a[k], &pid)) < 0) {
            return 0;
        }
    }
    for (int k = 0; device >= 0 && spec[2 * k]; k++) {
        int n = spec[2 * k + 1] - '0';
        int ok = 1;
        switch (spec[2 * k]) {
        case 'd':
            ok = granted_range(slot, a[k], a[n], device);
            break;
        case 'm':
            ok = a[n] <= a[k];
            break;
        case 'k':
            ok = a[k] < MDEV_CH_PLAIN_KINDS;
            break;
        case 'e':
            ok = granted_event(slot, a[k], device, 0);
            break;
        case 'w':
            ok = granted_event(slot, a[k], device, MDEV_CH_G_WAIT);
            break;
        default:
            break;
        }
        if (!ok) {
            return 0;
        }
    }
    if (device < 0 || !both_alive(device, pid)) {
        return 0;
    }
    for (int k = 0; spec[2 * k]; k++) {       /* last: taking the grant uses it up */
        if (spec[2 * k] == 'x' && !(made_here(a[k]) ? take_record(a[k], device) : take_executor(a[k], device))) {
            return 0;
        }
    }
    return 1;
}

/* The call appended to this thread's ring if its spec's checks pass and the ring has room
 * (the result: ACL_SUCCESS); 0 when it must be made synchronously. */
static int call_later(mdev_face* face, int index, const char* spec, mdev_result* result, const char* format,
                      va_list* args)
{
    if (serving || face->entries[index] != known_marker() || my_slot < 0 || my_generation != S.generation
        || S.area == NULL || S.dead) {
        return 0;                /* nested in a service, unknown to the agent yet, or no session */
    }
    uint64_t a[MDEV_CH_RING_ARGS];
    int n = 0;
    va_list copy;
    va_copy(copy, *args);
    for (const char* letter = format; *letter; letter++, n++) {
        if (n == (int)MDEV_CH_RING_ARGS || (*letter != 'i' && *letter != 'u' && *letter != 'p')) {
            va_end(copy);
            return 0;
        }
        a[n] = *letter == 'i' ? (uint64_t)va_arg(copy, long long) : va_arg(copy, unsigned long long);
    }
    va_end(copy);
    unsigned char* slot = slot_at(my_slot);
    _Atomic uint32_t* tail = U32(slot, MDEV_CH_S_RING_TAIL);
    uint32_t at = atomic_load(tail);
    if (at - atomic_load(U32(slot, MDEV_CH_S_RING_HEAD)) >= MDEV_CH_RING_ENTRIES || !granted(slot, spec, a)) {
        return 0;
    }
    unsigned char* entry = slot + MDEV_CH_S_RING + (size_t)(at % MDEV_CH_RING_ENTRIES) * MDEV_CH_ENTRY_BYTES;
    *U64(entry, 0) = (uint64_t)(uintptr_t)face;
    *U32(entry, 8) = (uint32_t)index;
    memcpy(entry + 16, a, sizeof(uint64_t) * (size_t)n);
    atomic_store(tail, at + 1);
    atomic_fetch_add(DOORBELL(slot), 1);
    if (atomic_load(AGENT_SLEEPS(slot))) {
        futex_wake(DOORBELL(slot));
    }
    result->ret = 0;
    return 1;
}

/* aclnnXGetWorkspaceSize: answered here for a signature the agent said passed, else by the
 * agent (which says whether its signature passes from now on) */
static void workspace_size(mdev_face* face, int index, mdev_result* result, const char* outputs,
                           const char* format, va_list* args)
{
    static __thread workspace_call call;
    int readable = !serving && face->entries[index] == known_marker() && my_slot >= 0
                   && my_generation == S.generation && S.area != NULL && !S.dead
                   && read_call(face, index, format, args, &call);
    if (readable && signature_known(&call) && make_record(face, index, &call, result)) {
        return;
    }
    agent_call(face, index, result, outputs, format, args);
    if (readable && result->ret == 0 && result->stored && my_slot >= 0
        && atomic_load(U32(slot_at(my_slot), MDEV_CH_S_SIGNED))) {
        learn_signature(&call);
    }
}

/* ------------------------------------------------------------------ the entry */
static void decide(void)
{
    pthread_key_create(&slot_key, thread_gone);
    /* MDEV_CAPI=agent or embedded; by default the agent, unless this process runs mdev's
       Python runtime itself (mdev.runtime sets MDEV_RUNTIME_PID): then the library shares it */
    const char* which = getenv("MDEV_CAPI");
    const char* runtime = getenv("MDEV_RUNTIME_PID");
    int in_process = runtime != NULL && atol(runtime) == (long)getpid();
    if (which != NULL ? strcmp(which, "agent") == 0 : !in_process) {
        pthread_atfork(before_fork, after_fork_parent, after_fork_child);
        mode = AGENT;
        return;
    }
    Dl_info self;
    char path[4096];
    void* embed = NULL;
    if (dladdr((void*)&mdev_call, &self) && self.dli_fname != NULL) {
        const char* slash = strrchr(self.dli_fname, '/');
        int dir = slash != NULL ? (int)(slash - self.dli_fname) : 1;
        snprintf(path, sizeof path, "%.*s/libmdev_embed.so", dir, slash != NULL ? self.dli_fname : ".");
        embed = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    }
    embedded_call = embed != NULL ? (vcall_fn)dlsym(embed, "mdev_vcall") : NULL;
    if (embedded_call == NULL) {
        fprintf(stderr, "mdev: cannot load libmdev_embed.so: %s\n", dlerror());
    }
    mode = EMBEDDED;
}

void mdev_call(mdev_face* face, int index, uint64_t fail, mdev_result* result, const char* outputs,
               const char* format, ...)
{
    pthread_once(&decided, decide);
    result->ret = fail;
    result->stored = 0;
    va_list args;
    va_start(args, format);
    if (mode == AGENT) {
        const char* spec = face->specs != NULL ? face->specs[index] : NULL;
        if (spec != NULL && spec[0] == 'G') {
            workspace_size(face, index, result, outputs, format, &args);
        } else if (spec == NULL || !call_later(face, index, spec, result, format, &args)) {
            agent_call(face, index, result, outputs, format, &args);
        }
    } else if (embedded_call != NULL) {
        embedded_call(face, index, fail, result, outputs, format, args);
    }
    va_end(args);
}

char* mdev_format(const char* format, va_list args)
{
    va_list again;
    va_copy(again, args);
    int size = vsnprintf(NULL, 0, format, again);
    va_end(again);
    char* text = malloc(size > 0 ? (size_t)size + 1 : 1);
    if (text != NULL) {
        if (size > 0) {
            vsnprintf(text, (size_t)size + 1, format, args);
        } else {
            text[0] = '\0';
        }
    }
    return text;
}
