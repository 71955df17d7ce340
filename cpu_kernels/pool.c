/* The native kernels' thread pool: the parts of one kernel call run on worker threads that
 * never enter Python, handed over in a few microseconds (native/parallel.py's pool of Python
 * threads takes ~40-60 us a hand-off: a futex wake and the GIL passed twice).
 *
 * A part is a record (one part's arguments, in memory the caller laid out) and a function
 * of it, `int fn(const void *record)`; er_cpu_pool_run runs records[0 .. parts) on the
 * calling thread and up to threads - 1 workers, each taking the next part until none is
 * left, and returns the largest code any part returned.
 *
 * Workers spin a while after each run (a model's next node comes within microseconds), then
 * sleep on a condition variable. One run at a time: a call made while another runs (a second
 * session on another thread) runs its parts on its own thread. After a fork, the child starts
 * without workers. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "isa.h"

#define MAX_WORKERS 63
#define SPIN_ROUNDS (1 << 14)   /* pause rounds before a worker sleeps: ~0.1-0.4 ms */

typedef int (*part_fn)(const void *record);

static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;      /* one run at a time */
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static atomic_int sleepers, busy, open_run, worst;
static atomic_uint_fast64_t generation;
static atomic_llong next_part, finished;
static int workers, active;          /* started; taking part in this run (run_lock held) */
static part_fn job_fn;
static const uint8_t *job_records;
static int64_t job_stride, job_parts;

static inline void pause_once(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void take_parts(void) {
    for (;;) {
        int64_t i = atomic_fetch_add(&next_part, 1);
        if (i >= job_parts) return;
        int code = job_fn(job_records + i * job_stride);
        int seen = atomic_load(&worst);
        while (code > seen && !atomic_compare_exchange_weak(&worst, &seen, code)) {
        }
        atomic_fetch_add(&finished, 1);
    }
}

/* Until `generation` moves past *seen: spinning first, then asleep. */
static void wait_for_run(uint64_t *seen) {
    for (int i = 0; i < SPIN_ROUNDS; i++) {
        uint64_t now = atomic_load(&generation);
        if (now != *seen) {
            *seen = now;
            return;
        }
        pause_once();
    }
    pthread_mutex_lock(&sleep_lock);
    atomic_fetch_add(&sleepers, 1);
    while (atomic_load(&generation) == *seen) pthread_cond_wait(&wake, &sleep_lock);
    atomic_fetch_sub(&sleepers, 1);
    pthread_mutex_unlock(&sleep_lock);
    *seen = atomic_load(&generation);
}

typedef struct { int index; uint64_t seen; } WorkerStart;
static WorkerStart starts[MAX_WORKERS];

/* A worker takes parts only while a run is open (`busy` tells the caller it may still be
 * reading the job: the caller closes the run, then waits for busy to reach 0 before the next
 * job is written). */
static void *worker(void *arg) {
    WorkerStart *start = (WorkerStart *)arg;
    uint64_t seen = start->seen;
    for (;;) {
        wait_for_run(&seen);
        atomic_fetch_add(&busy, 1);
        if (atomic_load(&open_run) && start->index < active) take_parts();
        atomic_fetch_sub(&busy, 1);
    }
    return 0;
}

static void start_workers(int wanted) {
    while (workers < wanted) {
        starts[workers].index = workers;
        starts[workers].seen = atomic_load(&generation);
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int failed = pthread_create(&thread, &attr, worker, &starts[workers]);
        pthread_attr_destroy(&attr);
        if (failed) return;              /* fewer workers: the caller takes more parts */
        workers++;
    }
}

static int run_here(part_fn fn, const uint8_t *records, int64_t stride, int64_t parts) {
    int code = 0;
    for (int64_t i = 0; i < parts; i++) {
        int c = fn(records + i * stride);
        code = c > code ? c : code;
    }
    return code;
}

static void forget_workers(void) {     /* in a forked child: the workers stayed behind */
    pthread_mutex_t fresh_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t fresh_cond = PTHREAD_COND_INITIALIZER;
    run_lock = fresh_lock;
    sleep_lock = fresh_lock;
    wake = fresh_cond;
    workers = 0;
    atomic_store(&sleepers, 0);
    atomic_store(&busy, 0);
    atomic_store(&open_run, 0);
}

static pthread_once_t fork_handler = PTHREAD_ONCE_INIT;
static void register_fork_handler(void) { pthread_atfork(0, 0, forget_workers); }

EXPORT int er_cpu_pool_run(part_fn fn, const uint8_t *records, int64_t stride, int64_t parts,
                           int64_t threads) {
    if (parts <= 1 || threads <= 1 || pthread_mutex_trylock(&run_lock) != 0)
        return run_here(fn, records, stride, parts);
    pthread_once(&fork_handler, register_fork_handler);
    int64_t wanted = threads - 1 < parts - 1 ? threads - 1 : parts - 1;
    start_workers(wanted < MAX_WORKERS ? (int)wanted : MAX_WORKERS);
    job_fn = fn;
    job_records = records;
    job_stride = stride;
    job_parts = parts;
    active = (int)(wanted < workers ? wanted : workers);
    atomic_store(&next_part, 0);
    atomic_store(&finished, 0);
    atomic_store(&worst, 0);
    atomic_store(&open_run, 1);
    atomic_fetch_add(&generation, 1);
    if (atomic_load(&sleepers)) {
        pthread_mutex_lock(&sleep_lock);
        pthread_cond_broadcast(&wake);
        pthread_mutex_unlock(&sleep_lock);
    }
    take_parts();
    while (atomic_load(&finished) < parts) pause_once();
    atomic_store(&open_run, 0);
    while (atomic_load(&busy)) pause_once();
    int code = atomic_load(&worst);
    pthread_mutex_unlock(&run_lock);
    return code;
}

/* The workers started so far (for tests). */
EXPORT int er_cpu_pool_workers(void) { return workers; }
