/* mdev kernel runner: runs the native Ascend C kernels of one emulated device.
 *
 *   device process --LOAD image id + memfd (SCM_RIGHTS)--> dlopen, reply its kernels
 *                  --RUN kernel, blocks, slots, maps------> map the segments, translate the
 *                                                           pointer slots, run the blocks on
 *                                                           threads, reply status + printf text
 *                  --UNLOAD image id------------------------> dlclose
 *
 * Started by the device process (mdev/board/native.py) with the socket as argument 1; it ends
 * when the socket closes.  Launches may come ahead of their turn (a stream's next launches are
 * sent while one runs): they run in the order they came, one reply each, and the requests are
 * read in large gulps so a queue of them costs no system call apiece.  SIGUSR1 (a stream
 * aborted or destroyed) makes it skip the launches behind the stream's head (the one running,
 * or else the next): it replies SKIPPED for them, and the device process retires it.  The device process kills it to stop a running kernel (stream abort,
 * forced stream destroy or device reset); a kernel's wild pointer (SIGSEGV, SIGBUS, ...), a
 * fault its API calls report, or a trap ends only its block: the launch then fails.
 *
 * Every block has its block index and a Unified Buffer of MDEV_ASCENDC_UB_SIZE bytes; a launch's
 * blocks start on the runner's main thread, and once it has run 1 ms every block left gets a
 * thread of its own (threads are kept for the next launch), so blocks that wait for each other
 * or run long run concurrently.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mdev_ascendc_abi.h"

enum { REQ_LOAD = 1, REQ_RUN = 2, REQ_UNLOAD = 3 };
enum { DONE_OK = 0, DONE_FAULT = 1, DONE_TRAP = 2, DONE_SKIPPED = 3 };
#define MAX_IMAGES 1024
#define MAX_OUTPUT (4u << 20)
#define ALT_STACK (64 * 1024)

static int sock = -1;

/* ------------------------------------------------------------------ images */
typedef struct {
    uint32_t id;
    int fd;                  /* open while loaded: dlopen knows an image by its path, /proc/self/fd/<fd> */
    void* handle;
    const mdev_image_info* info;
} image_t;
static image_t images[MAX_IMAGES];

static image_t* image_of(uint32_t id) {
    for (int i = 0; i < MAX_IMAGES; i++)
        if (images[i].handle != NULL && images[i].id == id) return &images[i];
    return NULL;
}

/* ------------------------------------------------------------------ segments */
typedef struct segment {
    char* name;
    unsigned char* base;
    size_t size;
    ino_t ino;
    struct segment* next;
} segment_t;
static segment_t* segments;

/* Unmap the segments whose names are gone or name another file now (a pinned buffer freed, a
 * peer device restarted under new names): names never come back, so without this a pooled
 * runner would keep every segment it ever reached mapped, dead peers' HBM included.  Called
 * between launches, when no block holds a pointer into them. */
static void forget_gone_segments(void) {
    segment_t** link = &segments;
    while (*link != NULL) {
        segment_t* s = *link;
        char path[512];
        struct stat st;
        snprintf(path, sizeof path, "/dev/shm%s", s->name);
        if (s->base != NULL && stat(path, &st) == 0 && st.st_ino == s->ino) {
            link = &s->next;
            continue;
        }
        if (s->base != NULL) munmap(s->base, s->size);
        *link = s->next;
        free(s->name);
        free(s);
    }
}

static segment_t* segment_of(const char* name, char* why, size_t why_len) {
    char path[512];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(why, why_len, "cannot map %s: %s", name, strerror(errno));
        return NULL;
    }
    for (segment_t* s = segments; s != NULL; s = s->next)
        if (strcmp(s->name, name) == 0) {
            if (s->ino == st.st_ino && s->size == (size_t)st.st_size) return s;
            munmap(s->base, s->size);       /* the name was made again: map the new one */
            s->base = NULL;
            s->size = 0;
        }
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, why_len, "cannot open %s: %s", name, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    void* base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        snprintf(why, why_len, "cannot map %s: %s", name, strerror(errno));
        return NULL;
    }
    segment_t* s = segments;
    while (s != NULL && !(strcmp(s->name, name) == 0 && s->base == NULL)) s = s->next;
    if (s == NULL) {
        s = calloc(1, sizeof *s);
        s->name = strdup(name);
        s->next = segments;
        segments = s;
    }
    s->base = base;
    s->size = (size_t)st.st_size;
    s->ino = st.st_ino;
    return s;
}

/* ------------------------------------------------------------------ the launch */
typedef struct {
    unsigned char* base;
    size_t extent;
    uint64_t device_address;       /* what the pointer argument was on the device */
} reach_t;

static struct {
    const mdev_kernel_info* kernel;
    uint64_t* slots;
    reach_t* reach;
    uint32_t nreach;
    int64_t blocks;
    int64_t next;                  /* next block to claim (atomic) */
    int64_t done;
    uint64_t generation;
    int status;
    int64_t fault_block;
    char message[1024];
    const unsigned char* bad_address;     /* a GlobalTensor access outside the reachable memory */
    uint64_t bad_bytes;
    char* output;
    size_t output_len, output_cap;
    int output_cut;
} L;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;     /* L's results, output */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER, finished = PTHREAD_COND_INITIALIZER;
static int workers;

static __thread sigjmp_buf jump;
static __thread volatile sig_atomic_t in_block;
static __thread int64_t current_block;

static void record(int status, const char* message) {
    pthread_mutex_lock(&lock);
    if (L.status == DONE_OK) {
        L.status = status;
        L.fault_block = current_block;
        snprintf(L.message, sizeof L.message, "%s", message);
    }
    pthread_mutex_unlock(&lock);
}

static void hook_print(const char* text, size_t len) {
    pthread_mutex_lock(&lock);
    if (L.output_len + len > MAX_OUTPUT) {
        L.output_cut = 1;
    } else {
        if (L.output_len + len > L.output_cap) {
            size_t cap = L.output_cap ? L.output_cap : 4096;
            while (cap < L.output_len + len) cap *= 2;
            L.output = realloc(L.output, cap);
            L.output_cap = cap;
        }
        memcpy(L.output + L.output_len, text, len);
        L.output_len += len;
    }
    pthread_mutex_unlock(&lock);
}

static void hook_fault(const char* message) {
    record(DONE_FAULT, message);
    siglongjmp(jump, 1);
}

static void hook_gm_fault(const void* address, uint64_t nbytes, const char* message) {
    pthread_mutex_lock(&lock);
    if (L.status == DONE_OK) {
        L.bad_address = address;
        L.bad_bytes = nbytes;
    }
    pthread_mutex_unlock(&lock);
    hook_fault(message);
}

/* the device address of a bad access: from the pointer argument below it */
static uint64_t device_address_of(const unsigned char* p) {
    const reach_t* best = NULL;
    for (uint32_t i = 0; i < L.nreach; i++)
        if (L.reach[i].base <= p && (best == NULL || L.reach[i].base > best->base)) best = &L.reach[i];
    return best != NULL ? best->device_address + (uint64_t)(p - best->base) : 0;
}

static void hook_trap(const char* file, int line) {
    char message[600];
    snprintf(message, sizeof message, "executed a trap (asm(\"trap\")) at %s:%d", file, line);
    record(DONE_TRAP, message);
    siglongjmp(jump, 1);
}

static size_t hook_gm_extent(const void* address) {
    const unsigned char* p = address;
    for (uint32_t i = 0; i < L.nreach; i++)
        if (p >= L.reach[i].base && p < L.reach[i].base + L.reach[i].extent)
            return (size_t)(L.reach[i].base + L.reach[i].extent - p);
    return 0;
}

/* SyncAll: a barrier of the launch's blocks; a block that faulted (it never arrives) breaks it */
static pthread_mutex_t barrier_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t barrier_open = PTHREAD_COND_INITIALIZER;
static int64_t barrier_waiting;
static uint64_t barrier_round;
static int barrier_broken;

static void hook_sync_all(void) {
    pthread_mutex_lock(&barrier_lock);
    uint64_t round = barrier_round;
    int broken = barrier_broken;
    if (!broken && ++barrier_waiting == L.blocks) {
        barrier_waiting = 0;
        barrier_round++;
        pthread_cond_broadcast(&barrier_open);
    } else {
        while (!broken && barrier_round == round) {
            pthread_cond_wait(&barrier_open, &barrier_lock);
            broken = barrier_broken;
        }
    }
    pthread_mutex_unlock(&barrier_lock);
    if (broken) hook_fault("SyncAll: another block of the launch faulted before reaching it");
}

static void break_barrier(void) {
    pthread_mutex_lock(&barrier_lock);
    barrier_broken = 1;
    pthread_cond_broadcast(&barrier_open);
    pthread_mutex_unlock(&barrier_lock);
}

static const mdev_hooks hooks = {hook_print, hook_fault, hook_trap, hook_gm_extent, hook_sync_all, hook_gm_fault};

static void on_signal(int sig, siginfo_t* info, void* context) {
    (void)context;
    if (!in_block) {            /* the runner's own fault: die of it */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    char message[160];
    snprintf(message, sizeof message, "%s at address %p (a wild pointer, or an address the kernel read from "
             "device memory: mdev translates only pointer arguments)", strsignal(sig), info->si_addr);
    record(DONE_FAULT, message);
    siglongjmp(jump, 1);
}

static void run_block(int64_t idx, unsigned char* ub) {
    mdev_block block = {idx, L.blocks, ub, &hooks};
    current_block = idx;
    /* the signal mask need not be saved (a syscall per block): the fault handlers run with
     * SA_NODEFER, so jumping out of one leaves the mask as it was */
    if (sigsetjmp(jump, 0) == 0) {
        in_block = 1;
        L.kernel->invoke(&block, L.slots);
    } else {
        break_barrier();        /* blocks waiting in SyncAll for this one would wait forever */
    }
    in_block = 0;
}

static int64_t launch_started_ns;          /* 0: no launch of several blocks running */
static uint64_t launch_generation;
/* helpers the minder asked for and no worker has taken yet: a worker that was not waiting
 * when it asked (still starting, or finishing a block) takes one when it comes back, where a
 * bare signal would be lost and blocks waiting in SyncAll for the rest would wait forever */
static int64_t help_tickets;

static void* worker(void* arg) {
    (void)arg;
    stack_t alt = {.ss_sp = malloc(ALT_STACK), .ss_size = ALT_STACK, .ss_flags = 0};
    sigaltstack(&alt, NULL);
    unsigned char* ub = aligned_alloc(64, MDEV_ASCENDC_UB_SIZE);
    for (;;) {
        pthread_mutex_lock(&pool_lock);
        while (help_tickets == 0 || launch_started_ns == 0) pthread_cond_wait(&work, &pool_lock);
        help_tickets--;
        pthread_mutex_unlock(&pool_lock);
        int64_t idx;
        while ((idx = __atomic_fetch_add(&L.next, 1, __ATOMIC_SEQ_CST)) < L.blocks) {
            run_block(idx, ub);
            pthread_mutex_lock(&pool_lock);
            if (++L.done == L.blocks) pthread_cond_signal(&finished);
            pthread_mutex_unlock(&pool_lock);
        }
    }
    return NULL;
}

/* Helpers join a launch once it has run HELPERS_AFTER_NS: the blocks of an ordinary launch are
 * all done by then on the runner's main thread (waking a thread per block would cost more than
 * the blocks), while blocks that run long, or wait for each other, get every block a thread.
 * The minder looks every HELPERS_AFTER_NS while launches of several blocks come (so a launch
 * wakes nobody on its way), and sleeps until the next one after MINDER_IDLE_NS without. */
#define HELPERS_AFTER_NS 1000000L
#define MINDER_IDLE_NS 20000000L
static pthread_cond_t minder_wake = PTHREAD_COND_INITIALIZER;
static int minder_asleep;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void* minder(void* arg) {
    (void)arg;
    int64_t last_seen = now_ns();
    uint64_t helped = 0;
    for (;;) {
        struct timespec nap = {0, HELPERS_AFTER_NS};
        nanosleep(&nap, NULL);
        pthread_mutex_lock(&pool_lock);
        int64_t now = now_ns(), started = launch_started_ns;
        if (started) {
            last_seen = now;
            if (now - started >= HELPERS_AFTER_NS && helped != launch_generation) {
                helped = launch_generation;
                int64_t left = L.blocks - __atomic_load_n(&L.next, __ATOMIC_SEQ_CST);
                help_tickets = left < workers ? left : workers;     /* a helper for each block left */
                if (help_tickets > 0) pthread_cond_broadcast(&work);
            }
        } else if (now - last_seen > MINDER_IDLE_NS) {
            minder_asleep = 1;
            while (minder_asleep) pthread_cond_wait(&minder_wake, &pool_lock);
            last_seen = now_ns();
        }
        pthread_mutex_unlock(&pool_lock);
    }
    return NULL;
}

static int start_threads(int64_t blocks) {
    static int minder_started;
    if (!minder_started) {
        pthread_t t;
        if (pthread_create(&t, NULL, minder, NULL) != 0) return -1;
        pthread_detach(t);
        minder_started = 1;
    }
    while (workers < blocks - 1) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 8u << 20);
        int err = pthread_create(&t, &attr, worker, NULL);
        pthread_attr_destroy(&attr);
        if (err != 0) return workers > 0 ? 0 : err;     /* fewer threads than blocks: they take turns */
        pthread_detach(t);
        workers++;
    }
    return 0;
}

static unsigned char* main_ub;

static int run_blocks(int64_t blocks) {
    pthread_mutex_lock(&pool_lock);
    int err = blocks > 1 ? start_threads(blocks) : 0;
    if (err != 0) {
        pthread_mutex_unlock(&pool_lock);
        return err;
    }
    L.next = 0;
    L.done = 0;
    L.blocks = blocks;
    L.generation++;
    if (blocks > 1) {
        launch_started_ns = now_ns();
        launch_generation = L.generation;
        if (minder_asleep) {
            minder_asleep = 0;
            pthread_cond_signal(&minder_wake);
        }
    }
    pthread_mutex_unlock(&pool_lock);
    if (main_ub == NULL) main_ub = aligned_alloc(64, MDEV_ASCENDC_UB_SIZE);
    int64_t idx, mine = 0;
    while ((idx = __atomic_fetch_add(&L.next, 1, __ATOMIC_SEQ_CST)) < blocks) {
        run_block(idx, main_ub);
        mine++;
    }
    pthread_mutex_lock(&pool_lock);
    L.done += mine;
    while (L.done < blocks) pthread_cond_wait(&finished, &pool_lock);
    launch_started_ns = 0;
    help_tickets = 0;
    pthread_mutex_unlock(&pool_lock);
    return 0;
}

/* ------------------------------------------------------------------ the wire */
/* Requests are read into a buffer as much as the socket holds, so launches sent ahead cost one
 * read for many; a descriptor passed with a load is kept until the load takes it. */
static unsigned char* inbuf;
static size_t in_start, in_end, in_cap;
static int passed_fd = -1;
static volatile sig_atomic_t skipping, spare, launch_running;

/* the stream's head launch runs on: the one running, or else the next to come */
static void on_skip(int sig) {
    (void)sig;
    if (!skipping) spare = !launch_running;
    skipping = 1;
}

/* at least ``need`` unread bytes in the buffer (-1: the socket closed) */
static int fill(size_t need) {
    while (in_end - in_start < need) {
        if (in_start > 0) {
            memmove(inbuf, inbuf + in_start, in_end - in_start);
            in_end -= in_start;
            in_start = 0;
        }
        if (in_cap - in_end < 65536 || in_cap < need) {
            size_t cap = in_cap ? in_cap : 65536;
            while (cap < need || cap - in_end < 65536) cap *= 2;
            unsigned char* grown = realloc(inbuf, cap);
            if (grown == NULL) return -1;
            inbuf = grown;
            in_cap = cap;
        }
        char control[CMSG_SPACE(sizeof(int))];
        struct iovec iov = {inbuf + in_end, in_cap - in_end};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                             .msg_controllen = sizeof control};
        ssize_t n;
        do n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC); while (n < 0 && errno == EINTR);
        if (n <= 0) return -1;
        for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                if (passed_fd >= 0) close(passed_fd);
                memcpy(&passed_fd, CMSG_DATA(c), sizeof(int));
            }
        in_end += (size_t)n;
    }
    return 0;
}

static void write_all(const void* buf, size_t len) {
    const unsigned char* p = buf;
    while (len > 0) {
        ssize_t n = write(sock, p, len);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            _exit(1);
        }
        p += n;
        len -= (size_t)n;
    }
}

static void reply(uint32_t status, const char* text, size_t len) {
    uint32_t head[2] = {status, (uint32_t)len};
    write_all(head, sizeof head);
    write_all(text, len);
}

static void load(const unsigned char* p, size_t len, int fd) {
    char text[8192];
    if (len < 4 || fd < 0) {
        reply(1, "a load without its image", 24);
        return;
    }
    uint32_t id;
    memcpy(&id, p, 4);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        close(fd);
        int n = snprintf(text, sizeof text, "not a loadable device image: %s", dlerror());
        reply(1, text, (size_t)n);
        return;
    }
    mdev_image_entry entry = (mdev_image_entry)dlsym(handle, MDEV_ASCENDC_IMAGE_SYMBOL);
    const mdev_image_info* info = entry != NULL ? entry() : NULL;
    int slot = -1;
    for (int i = 0; i < MAX_IMAGES && slot < 0; i++)
        if (images[i].handle == NULL) slot = i;
    if (info == NULL || info->abi != MDEV_ASCENDC_ABI || slot < 0) {
        dlclose(handle);
        close(fd);
        int n = snprintf(text, sizeof text, "%s", slot < 0 ? "too many device images loaded"
                         : "not an Ascend C device image of this mdev (no " MDEV_ASCENDC_IMAGE_SYMBOL " of ABI 1)");
        reply(1, text, (size_t)n);
        return;
    }
    images[slot] = (image_t){id, fd, handle, info};
    size_t n = 0;
    for (uint32_t k = 0; k < info->count && n < sizeof text - 300; k++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s\t%u\t%llu\n", info->kernels[k]->name,
                              info->kernels[k]->nparams, (unsigned long long)info->kernels[k]->pointers);
    reply(0, text, n);
}

static void unload(const unsigned char* p, size_t len) {
    uint32_t id;
    if (len >= 4) {
        memcpy(&id, p, 4);
        image_t* image = image_of(id);
        if (image != NULL) {
            dlclose(image->handle);
            close(image->fd);
            image->handle = NULL;
        }
    }
    reply(0, "", 0);
}

/* the reply: status, block, ns, message and output lengths, output cut, the bad access (device
 * address, bytes), when it ended (CLOCK_MONOTONIC ns: the next launch's start), message, output */
static void done(int status, int64_t block, uint64_t ns, const char* message, uint64_t bad, uint64_t bad_bytes) {
    uint32_t mlen = (uint32_t)strlen(message);
    uint32_t head[8] = {(uint32_t)status, (uint32_t)block, (uint32_t)ns, (uint32_t)(ns >> 32), mlen,
                        (uint32_t)L.output_len, (uint32_t)L.output_cut, 0};
    uint64_t where[3] = {bad, bad_bytes, (uint64_t)now_ns()};
    /* one write for the common reply (the device reads it with one call; two writes could
     * wake it twice) */
    unsigned char small[sizeof head + sizeof where + 1024];
    if (mlen + L.output_len <= 1024) {
        size_t n = 0;
        memcpy(small, head, sizeof head), n += sizeof head;
        memcpy(small + n, where, sizeof where), n += sizeof where;
        memcpy(small + n, message, mlen), n += mlen;
        if (L.output_len) memcpy(small + n, L.output, L.output_len), n += L.output_len;
        write_all(small, n);
        return;
    }
    write_all(head, sizeof head);
    write_all(where, sizeof where);
    write_all(message, mlen);
    if (L.output_len) write_all(L.output, L.output_len);
}

static void run(const unsigned char* p, size_t len) {
    /* image, kernel, blocks, slots, maps; slots u64[]; maps {u32 slot, u32 name length, u64 offset, u64 extent, name} */
    uint32_t head[5];
    char why[700];
    L.output_len = 0;
    L.output_cut = 0;
    if (len < sizeof head) return done(DONE_FAULT, 0, 0, "a malformed launch", 0, 0);
    memcpy(head, p, sizeof head);
    image_t* image = image_of(head[0]);
    if (image == NULL || head[1] >= image->info->count)
        return done(DONE_FAULT, 0, 0, "the launch names a kernel of no loaded image", 0, 0);
    const mdev_kernel_info* kernel = image->info->kernels[head[1]];
    uint32_t nslots = head[3], nmaps = head[4];
    size_t at = sizeof head;
    if (nslots < kernel->nparams || at + 8ull * nslots > len)
        return done(DONE_FAULT, 0, 0, "the argument block is shorter than the kernel's parameters", 0, 0);
    uint64_t* slots = calloc(nslots + 1, 8);
    memcpy(slots, p + at, 8ull * nslots);
    at += 8ull * nslots;
    reach_t* reach = calloc(nmaps + 1, sizeof *reach);
    forget_gone_segments();
    for (uint32_t i = 0; i < nmaps; i++) {
        uint32_t slot, nlen;
        uint64_t offset, extent;
        if (at + 24 > len) {
            free(slots);
            free(reach);
            return done(DONE_FAULT, 0, 0, "a malformed launch", 0, 0);
        }
        memcpy(&slot, p + at, 4);
        memcpy(&nlen, p + at + 4, 4);
        memcpy(&offset, p + at + 8, 8);
        memcpy(&extent, p + at + 16, 8);
        at += 24;
        if (at + nlen > len || nlen >= 256 || slot >= nslots) {
            free(slots);
            free(reach);
            return done(DONE_FAULT, 0, 0, "a malformed launch", 0, 0);
        }
        char name[256];
        memcpy(name, p + at, nlen);
        name[nlen] = 0;
        at += nlen;
        segment_t* s = segment_of(name, why, sizeof why);
        if (s == NULL) {
            free(slots);
            free(reach);
            return done(DONE_FAULT, 0, 0, why, 0, 0);
        }
        if (offset > s->size || extent > s->size - offset) {
            free(slots);
            free(reach);
            return done(DONE_FAULT, 0, 0, "an argument lies outside its segment", 0, 0);
        }
        reach[i] = (reach_t){s->base + offset, extent, slots[slot]};
        slots[slot] = (uint64_t)(uintptr_t)(s->base + offset);
    }
    L.kernel = kernel;
    L.slots = slots;
    L.reach = reach;
    L.nreach = nmaps;
    L.status = DONE_OK;
    L.fault_block = 0;
    L.bad_address = NULL;
    L.bad_bytes = 0;
    barrier_waiting = 0;
    barrier_broken = 0;
    L.message[0] = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int err = run_blocks((int64_t)head[2]);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t bad = L.bad_address != NULL ? device_address_of(L.bad_address) : 0;
    free(slots);
    free(reach);
    L.reach = NULL;
    L.nreach = 0;
    if (err != 0) {
        snprintf(why, sizeof why, "cannot start a block thread: %s", strerror(err));
        return done(DONE_FAULT, 0, 0, why, 0, 0);
    }
    uint64_t ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)(t1.tv_nsec - t0.tv_nsec);
    done(L.status, L.fault_block, ns, L.message, bad, L.bad_bytes);
}

/* Not PR_SET_PDEATHSIG: it fires when the device process's thread that started the runner
 * ends (a stream's worker), not when the process does. */
static pid_t parent;
static void* watch_parent(void* arg) {
    (void)arg;
    for (;;) {
        if (getppid() != parent) _exit(0);
        usleep(200000);
    }
    return NULL;
}

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SOCKET_FD (started by an mdev device process)\n", argv[0]);
        return 2;
    }
    sock = atoi(argv[1]);
    pthread_t orphan_watch;                 /* the device process's end is the runner's */
    parent = getppid();
    pthread_create(&orphan_watch, NULL, watch_parent, NULL);
    stack_t alt = {.ss_sp = malloc(ALT_STACK), .ss_size = ALT_STACK, .ss_flags = 0};
    sigaltstack(&alt, NULL);                /* blocks run here too: a stack overflow is their fault */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT};
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) sigaction(faults[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct sigaction skip;
    memset(&skip, 0, sizeof skip);
    skip.sa_handler = on_skip;
    skip.sa_flags = SA_RESTART;
    sigemptyset(&skip.sa_mask);
    sigaction(SIGUSR1, &skip, NULL);
    for (;;) {
        uint32_t header[2];
        if (fill(8) != 0) return 0;
        memcpy(header, inbuf + in_start, 8);
        if (fill(8 + (size_t)header[1]) != 0) return 1;
        const unsigned char* payload = inbuf + in_start + 8;
        in_start += 8 + (size_t)header[1];      /* the buffer moves only in the next fill() */
        int fd = passed_fd;
        passed_fd = -1;
        if (header[0] == REQ_LOAD) load(payload, header[1], fd);
        else if (header[0] == REQ_RUN && (!skipping || spare)) {
            spare = 0;
            launch_running = 1;
            run(payload, header[1]);
            launch_running = 0;
        } else if (header[0] == REQ_RUN) {
            L.output_len = 0;
            L.output_cut = 0;
            done(DONE_SKIPPED, 0, 0, "", 0, 0);
        } else if (header[0] == REQ_UNLOAD) {
            unload(payload, header[1]);
        } else {
            reply(1, "unknown request", 15);
        }
        if (fd >= 0 && header[0] != REQ_LOAD) close(fd);     /* a descriptor nothing asked for */
    }
}
