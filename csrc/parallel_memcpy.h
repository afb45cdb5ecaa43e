/* A memcpy split over a few host threads, for the CUDA shim's pinned
 * staging of large inputs and outputs. One core copies far less than the
 * PCIe link moves (benchmarks/README.md), so a large activation spends most
 * of its transfer in the host copy; a handful of threads bring the copy under
 * the DMA. Workers start on the first large copy and sleep between copies.
 * Header-only (static functions): included by the CUDA shim (csrc/cuda/) only. */
#ifndef RLX_PARALLEL_MEMCPY_H
#define RLX_PARALLEL_MEMCPY_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define PMC_MAX_WORKERS 4            /* helper threads beside the caller */
#define PMC_MIN_BYTES (1u << 20)     /* below this one thread copies alone */
#define PMC_PART_BYTES (256u << 10)  /* unit of work a thread claims */

typedef struct {
    pthread_mutex_t busy;            /* one copy at a time uses the workers */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    pthread_t threads[PMC_MAX_WORKERS];
    int wanted, n_workers, started, quit, active;   /* wanted < 0: from the core count */
    uint64_t generation;
    char *dst;
    const char *src;
    size_t size, next;               /* next: the next part's index, claimed atomically */
} pmc_pool;

static void pmc_init(pmc_pool *p, int workers) {
    memset(p, 0, sizeof *p);
    p->wanted = workers > PMC_MAX_WORKERS ? PMC_MAX_WORKERS : workers;
    pthread_mutex_init(&p->busy, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
}

static void pmc_copy_parts(pmc_pool *p) {
    for (;;) {
        const size_t at = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED) * (size_t)PMC_PART_BYTES;
        if (at >= p->size) return;
        const size_t n = p->size - at < PMC_PART_BYTES ? p->size - at : PMC_PART_BYTES;
        memcpy(p->dst + at, p->src + at, n);
    }
}

static void *pmc_worker(void *arg) {
    pmc_pool *p = arg;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->go, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        pmc_copy_parts(p);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0) pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Workers on first use: by default one fewer than half the online cores,
 * at most PMC_MAX_WORKERS (none on a machine of one or two cores). Called
 * with busy held. */
static void pmc_start(pmc_pool *p) {
    p->started = 1;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const int want = p->wanted >= 0 ? p->wanted
                     : cores / 2 > PMC_MAX_WORKERS ? PMC_MAX_WORKERS : (int)(cores / 2) - 1;
    for (int i = 0; i < want; ++i) {
        if (pthread_create(&p->threads[i], NULL, pmc_worker, p) != 0) break;
        p->n_workers = i + 1;
    }
}

static void pmc_copy(pmc_pool *p, void *dst, const void *src, size_t size) {
    if (size < PMC_MIN_BYTES) {
        memcpy(dst, src, size);
        return;
    }
    pthread_mutex_lock(&p->busy);
    if (!p->started) pmc_start(p);
    if (!p->n_workers) {
        memcpy(dst, src, size);
        pthread_mutex_unlock(&p->busy);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->dst = dst, p->src = src, p->size = size, p->next = 0;
    p->active = p->n_workers;
    ++p->generation;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    pmc_copy_parts(p);
    pthread_mutex_lock(&p->mu);
    while (p->active) pthread_cond_wait(&p->done, &p->mu);  /* every worker is past this job's parts */
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&p->busy);
}

static void pmc_destroy(pmc_pool *p) {
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_workers; ++i) pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->busy);
}

#endif
