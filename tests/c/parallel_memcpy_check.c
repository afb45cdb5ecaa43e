/* Exercises csrc/parallel_memcpy.h with forced workers (CI machines have two
 * cores, where the shim would use none): sizes around the thresholds, odd
 * sizes and offsets, two callers at once. Prints "ok" or what differed. */
#include <stdio.h>
#include <stdlib.h>

#include "parallel_memcpy.h"

static pmc_pool pool;

static int check(size_t size, size_t offset, unsigned seed) {
    char *src = malloc(size + offset + 1), *dst = malloc(size + offset + 1);
    if (!src || !dst) return 1;
    for (size_t i = 0; i < size + offset + 1; ++i) src[i] = (char)(seed * 31u + i * 7u), dst[i] = 0x55;
    pmc_copy(&pool, dst + offset, src + offset, size);
    int bad = memcmp(dst + offset, src + offset, size) != 0 || dst[size + offset] != 0x55 ||
              (offset && dst[offset - 1] != 0x55);
    if (bad) printf("size %zu offset %zu differs\n", size, offset);
    free(src), free(dst);
    return bad;
}

static void *caller(void *arg) {
    int bad = 0;
    for (unsigned r = 0; r < 20; ++r) bad |= check((3u << 20) + 4093u * r, r % 7, r + (unsigned)(uintptr_t)arg);
    return (void *)(uintptr_t)bad;
}

int main(void) {
    pmc_init(&pool, 3);
    const size_t sizes[] = {0, 1, PMC_MIN_BYTES - 1, PMC_MIN_BYTES, PMC_MIN_BYTES + 1, PMC_PART_BYTES * 5 + 3,
                            6291456, 6291456 + 12345};
    int bad = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; ++i)
        for (size_t off = 0; off < 3; ++off) bad |= check(sizes[i], off * 5, (unsigned)(i * 3 + off));
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; ++i) pthread_create(&t[i], NULL, caller, (void *)i);
    for (int i = 0; i < 2; ++i) {
        void *r;
        pthread_join(t[i], &r);
        bad |= (int)(uintptr_t)r;
    }
    if (pool.n_workers != 3) printf("expected 3 workers, got %d\n", pool.n_workers), bad = 1;
    pmc_destroy(&pool);
    puts(bad ? "FAILED" : "ok");
    return bad;
}
