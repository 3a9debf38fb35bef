/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of trainer/data/loader.c: determinism, sharding over ranks, the zero-copy ring
 * (acquire/release), exact evaluation sets, and bad images counted, exchanged and reported once. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/fixtures/png_write.h"
#include "tests/unit/data_fixture.h"
#include "trainer/data/dataset.h"
#include "trainer/data/loader.h"
#include "trainer/data/source.h"
#include "trainer/data/transform.h"

static void _epoch(dlt_dataset *ds, int workers, int rank, int world, int strict, uint8_t *images, int32_t *labels,
                   int *rc_out, int64_t *bad)
{
    dlt_loader *l;
    dlt_loader_config c = {.batch = 4,
                           .out = 32,
                           .train = 1,
                           .seed = 5,
                           .rank = rank,
                           .world = world,
                           .workers = workers,
                           .depth = 2,
                           .strict = strict};
    dlt_err err = DLT_ERR_INIT;
    int rc = 0;
    assert_int_equal(dlt_loader_create(&l, ds, &c, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_loader_start(l, 1, 0), 0);
    for (int64_t s = 0; s < dlt_loader_steps_per_epoch(l) && rc == 0; s++)
        rc = dlt_loader_next(l, images + (size_t)s * 4 * 32 * 32 * 3, labels + s * 4, dlt_err_fresh(&err));
    *rc_out = rc;
    *bad = dlt_loader_bad_images(l);
    dlt_loader_destroy(l);
}

#if !defined(__SANITIZE_ADDRESS__)
/* The process's address space in bytes (VmSize), or 0. */
static size_t _vm_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long kb = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmSize: %lu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return (size_t)kb * 1024;
}
#endif

/* Workers that cannot be started (no address space for their stacks: the first threads of this
 * process, so no stack is cached) fail the start with pthread_create's own error, EAGAIN, which it
 * returns without setting errno (the loader returned -errno: whatever a failed mmap left there, or
 * 0, a success with no worker running). Runs first: later tests leave stacks in glibc's cache. */
static void test_loader_threads_refused(void **state)
{
#if defined(__SANITIZE_ADDRESS__)
    (void)state;
    print_message("AddressSanitizer reserves terabytes of address space: no RLIMIT_AS under it (the plain build "
                  "runs this)\n");
#else
    static const char *const classes[] = {"c0", "c1"};
    char root[512];
    dlt_err err = DLT_ERR_INIT;
    dlt_dataset *ds;
    dlt_loader *l;
    dlt_loader_config c = {
        .batch = 2, .out = 32, .train = 1, .seed = 5, .rank = 0, .world = 1, .workers = 3, .depth = 2};
    struct rlimit old, low;
    int rc;
    (void)state;
    snprintf(root, sizeof(root), "%s/threads", g_dir);
    dlt_test_make_folder(root, classes, 2, 2, 0);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_loader_create(&l, ds, &c, dlt_err_fresh(&err)), 0);
    assert_int_equal(getrlimit(RLIMIT_AS, &old), 0);
    low = old;
    low.rlim_cur = _vm_size() + (1u << 20); /* a megabyte: less than one thread's stack */
    assert_true(low.rlim_cur > (1u << 20));
    assert_int_equal(setrlimit(RLIMIT_AS, &low), 0);
    errno = 0;
    rc = dlt_loader_start(l, 0, 0);
    assert_int_equal(setrlimit(RLIMIT_AS, &old), 0);
    assert_int_equal(rc, -EAGAIN);
    dlt_loader_destroy(l);
    dlt_dataset_close(ds);
#endif
}

static void test_loader(void **state)
{
    static const char *const classes[] = {"c0", "c1", "c2", "c3"};
    char root[512];
    dlt_err err = DLT_ERR_INIT;
    dlt_dataset *ds;
    uint8_t *a = calloc(16 * 32 * 32 * 3, 1), *b = calloc(16 * 32 * 32 * 3, 1);
    int32_t la[16], lb[16], counts[4] = {0};
    int rc;
    int64_t bad;
    (void)state;
    snprintf(root, sizeof(root), "%s/loader", g_dir);
    dlt_test_make_folder(root, classes, 4, 4, 0);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, dlt_err_fresh(&err)), 0);
    _epoch(ds, 1, 0, 1, 0, a, la, &rc, &bad);
    assert_int_equal(rc, 0);
    _epoch(ds, 3, 0, 1, 0, b, lb, &rc, &bad);
    assert_int_equal(rc, 0);
    assert_memory_equal(a, b, 16 * 32 * 32 * 3); /* thread count does not change the batches */
    assert_memory_equal(la, lb, sizeof(la));
    for (int i = 0; i < 16; i++)
        counts[la[i]]++;
    for (int c = 0; c < 4; c++)
        assert_int_equal(counts[c], 4); /* one epoch: every image once */
    /* Two ranks: disjoint halves, together the whole epoch. */
    _epoch(ds, 2, 0, 2, 0, a, la, &rc, &bad);
    _epoch(ds, 2, 1, 2, 0, b, lb, &rc, &bad);
    memset(counts, 0, sizeof(counts));
    for (int i = 0; i < 8; i++)
        counts[la[i]]++, counts[lb[i]]++;
    for (int c = 0; c < 4; c++)
        assert_int_equal(counts[c], 4);
    dlt_dataset_close(ds);

    /* Damaged images: replaced and counted; with strict the run fails naming the file. */
    snprintf(root, sizeof(root), "%s/loader_bad", g_dir);
    dlt_test_make_folder(root, classes, 4, 4, 2);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, dlt_err_fresh(&err)), 0);
    _epoch(ds, 2, 0, 1, 0, a, la, &rc, &bad);
    assert_int_equal(rc, 0);
    assert_true(bad >= 2);
    _epoch(ds, 2, 0, 1, 1, a, la, &rc, &bad);
    assert_int_equal(rc, -EIO);
    dlt_dataset_close(ds);
    free(a);
    free(b);
}

static int g_allocs, g_frees;

static void *_count_alloc(void *arg, size_t bytes)
{
    (void)arg;
    g_allocs++;
    return malloc(bytes);
}

static void _count_free(void *arg, void *p)
{
    (void)arg;
    g_frees++;
    free(p);
}

/* The zero-copy path the trainer uses: acquire hands out the ring slot itself (in memory from the
 * given allocator), held until released in order; the batches are those next() copies out; a ring
 * with every slot held refuses another acquire instead of waiting forever. */
static void test_loader_acquire(void **state)
{
    static const char *const classes[] = {"c0", "c1", "c2", "c3"};
    const size_t bb = 4 * 32 * 32 * 3;
    char root[512];
    dlt_err err = DLT_ERR_INIT;
    dlt_dataset *ds;
    dlt_loader *l;
    dlt_loader_config c = {.batch = 4,
                           .out = 32,
                           .train = 1,
                           .seed = 5,
                           .rank = 0,
                           .world = 1,
                           .workers = 2,
                           .depth = 3,
                           .alloc = _count_alloc,
                           .release = _count_free};
    uint8_t *ref = calloc(4 * bb, 1);
    int32_t lref[16];
    const uint8_t *im[3];
    const int32_t *lb[3];
    int rc;
    int64_t bad;
    (void)state;
    snprintf(root, sizeof(root), "%s/loader_acq", g_dir);
    dlt_test_make_folder(root, classes, 4, 4, 0);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, dlt_err_fresh(&err)), 0);
    _epoch(ds, 2, 0, 1, 0, ref, lref, &rc, &bad); /* epoch 1 through next() */
    assert_int_equal(rc, 0);
    assert_int_equal(dlt_loader_create(&l, ds, &c, dlt_err_fresh(&err)), 0);
    assert_int_equal(g_allocs, 3); /* the ring's images come from the allocator */
    assert_int_equal(dlt_loader_start(l, 1, 0), 0);
    /* Hold two (the step's and the next), release the older, hold the third, and so on. */
    assert_int_equal(dlt_loader_acquire(l, &im[0], &lb[0], dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_loader_acquire(l, &im[1], &lb[1], dlt_err_fresh(&err)), 0);
    assert_ptr_not_equal(im[0], im[1]);
    assert_memory_equal(im[0], ref, bb);
    assert_memory_equal(im[1], ref + bb, bb);
    assert_memory_equal(lb[1], lref + 4, 4 * sizeof(int32_t));
    assert_int_equal(dlt_loader_acquire(l, &im[2], &lb[2], dlt_err_fresh(&err)), 0);
    assert_memory_equal(im[2], ref + 2 * bb, bb);
    /* Every slot held: refused, and the message says what to do. */
    assert_int_equal(dlt_loader_acquire(l, &im[0], &lb[0], dlt_err_fresh(&err)), -EBUSY);
    assert_non_null(strstr(err.msg, "release"));
    dlt_loader_release(l);
    assert_int_equal(dlt_loader_acquire(l, &im[0], &lb[0], dlt_err_fresh(&err)), 0);
    assert_memory_equal(im[0], ref + 3 * bb, bb); /* decoded into the slot just given back */
    assert_memory_equal(im[1], ref + bb, bb);     /* still held: untouched */
    assert_memory_equal(lb[0], lref + 12, 4 * sizeof(int32_t));
    dlt_loader_destroy(l);
    assert_int_equal(g_frees, 3);
    dlt_dataset_close(ds);
    free(ref);
}

/* Evaluation scores every image exactly once whatever the batch and rank count: each rank's last
 * batch is short (its valid count says how short), a rank may have none; training with too few
 * images for one batch per rank is refused with the count, the batch, the ranks and the fix. */
static void test_loader_eval_exact(void **state)
{
    static const char *const classes[] = {"c0", "c1", "c2"};
    char root[512];
    dlt_err err = DLT_ERR_INIT;
    dlt_dataset *ds;
    dlt_loader *l;
    uint8_t *img = calloc(4 * 32 * 32 * 3, 1);
    int32_t lab[4];
    (void)state;
    snprintf(root, sizeof(root), "%s/evalset", g_dir);
    dlt_test_make_folder(root, classes, 3, 3, 0); /* 9 images: divides by neither batch 4 nor 2 or 4 ranks */
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, dlt_err_fresh(&err)), 0);
    for (int world = 1; world <= 16; world *= 2) {
        int seen[9] = {0}, total = 0;
        for (int rank = 0; rank < world; rank++) {
            dlt_loader_config c = {
                .batch = 4, .out = 32, .train = 0, .seed = 5, .rank = rank, .world = world, .workers = 2, .depth = 2};
            int64_t steps;
            assert_int_equal(dlt_loader_create(&l, ds, &c, dlt_err_fresh(&err)), 0);
            steps = dlt_loader_steps_per_epoch(l);
            assert_int_equal(dlt_loader_images_per_epoch(l), (9 - rank + world - 1) / world);
            assert_int_equal(steps, (dlt_loader_images_per_epoch(l) + 3) / 4);
            assert_int_equal(dlt_loader_start(l, 0, 0), 0);
            for (int64_t s = 0; s < steps; s++) {
                int nv;
                assert_int_equal(dlt_loader_next(l, img, lab, dlt_err_fresh(&err)), 0);
                nv = dlt_loader_last_valid(l);
                assert_true(nv >= 1 && nv <= 4);
                assert_true(s + 1 == steps || nv == 4); /* only the last batch is short */
                for (int j = 0; j < nv; j++) {
                    /* in order: rank r's k-th image is dataset index r + k * world (labels: 3 per class) */
                    int64_t idx = rank + (s * 4 + j) * world;
                    assert_true(idx < 9);
                    assert_int_equal(lab[j], idx / 3);
                    seen[idx]++;
                }
                total += nv;
            }
            if (steps == 0) /* fewer images than ranks: this rank has none, and says so if asked */
                assert_int_not_equal(dlt_loader_next(l, img, lab, dlt_err_fresh(&err)), 0);
            dlt_loader_destroy(l);
        }
        assert_int_equal(total, 9);
        for (int i = 0; i < 9; i++)
            assert_int_equal(seen[i], 1);
    }
    {
        /* Training: 9 images, batch 4 on 4 ranks: no full batch anywhere. */
        dlt_loader_config c = {.batch = 4, .out = 32, .train = 1, .seed = 5, .rank = 0, .world = 4, .workers = 1};
        assert_int_not_equal(dlt_loader_create(&l, ds, &c, dlt_err_fresh(&err)), 0);
        assert_non_null(strstr(err.msg, "9 image(s)"));
        assert_non_null(strstr(err.msg, "batch of 4 on each of 4 rank(s)"));
        assert_non_null(strstr(err.msg, "--batch 2"));
        c.world = 16;
        assert_int_not_equal(dlt_loader_create(&l, ds, &c, dlt_err_fresh(&err)), 0);
        assert_non_null(strstr(err.msg, "fewer ranks"));
        c.world = 2;
        assert_int_equal(dlt_loader_create(&l, ds, &c, dlt_err_fresh(&err)), 0);
        assert_int_equal(dlt_loader_steps_per_epoch(l), 1);
        dlt_loader_destroy(l);
    }
    dlt_dataset_close(ds);
    free(img);
}

/* Bad files once per run across ranks: what each rank found, exchanged, gives every rank the same
 * distinct total and nothing left to report. */
static void test_loader_bad_exchange(void **state)
{
    static const char *const classes[] = {"c0", "c1", "c2", "c3"};
    char root[512];
    dlt_err err = DLT_ERR_INIT;
    dlt_dataset *ds;
    dlt_loader *l[2];
    uint8_t *img = calloc(4 * 32 * 32 * 3, 1);
    int32_t lab[4];
    int64_t found[2][16];
    int n[2];
    (void)state;
    snprintf(root, sizeof(root), "%s/badx", g_dir);
    dlt_test_make_folder(root, classes, 4, 4, 2); /* c0/img00 and c0/img01 (indices 0 and 1) are damaged */
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, dlt_err_fresh(&err)), 0);
    for (int r = 0; r < 2; r++) {
        dlt_loader_config c = {.batch = 4, .out = 32, .train = 1, .seed = 5, .rank = r, .world = 2, .workers = 1};
        assert_int_equal(dlt_loader_create(&l[r], ds, &c, dlt_err_fresh(&err)), 0);
        assert_int_equal(dlt_loader_start(l[r], 0, 0), 0);
        for (int s = 0; s < 2; s++)
            assert_int_equal(dlt_loader_next(l[r], img, lab, dlt_err_fresh(&err)), 0);
    }
    for (int r = 0; r < 2; r++)
        n[r] = dlt_loader_bad_take(l[r], found[r], 16);
    assert_int_equal(n[0] + n[1] >= 2, 1); /* every damaged file met by some rank (replacements may add none) */
    for (int r = 0; r < 2; r++) {
        dlt_loader_bad_merge(l[r], found[1 - r], n[1 - r]);
        dlt_loader_bad_merge(l[r], found[r], n[r]); /* own indices again: no double count */
        assert_int_equal(dlt_loader_bad_files(l[r]), 2);
        assert_int_equal(dlt_loader_bad_take(l[r], found[r], 16), 0); /* handed out once */
    }
    {
        int64_t junk[2] = {-1, 99};
        dlt_loader_bad_merge(l[0], junk, 2); /* out of range: ignored */
        assert_int_equal(dlt_loader_bad_files(l[0]), 2);
    }
    dlt_loader_destroy(l[0]);
    dlt_loader_destroy(l[1]);
    dlt_dataset_close(ds);
    free(img);
}

/* Files whose content is not what their name says are counted once each, by kind, and travel to
 * the other ranks tagged through the bad-file exchange: after it, both ranks know the run's count
 * and neither counts them as bad. */
static void test_loader_renamed_exchange(void **state)
{
    static const char *const classes[] = {"c0", "c1", "c2", "c3"};
    char root[512], p[700];
    dlt_err err = DLT_ERR_INIT;
    dlt_dataset *ds;
    dlt_loader *l[2];
    uint8_t *img = calloc(3 * 32 * 32 * 3, 1), rgb[64 * 48 * 3], *png;
    int32_t lab[3];
    int64_t found[2][16], png_jpeg, jpeg_png;
    int n[2];
    size_t len;
    unsigned long jlen;
    unsigned char *j = dlt_test_jpeg(64, 48, 0, &jlen);
    (void)state;
    snprintf(root, sizeof(root), "%s/renamed", g_dir);
    dlt_test_make_folder(root, classes, 4, 4, 0);
    snprintf(p, sizeof(p), "%s/c1/zz.png", root); /* a JPEG named .png */
    dlt_test_write(p, j, jlen);
    for (size_t i = 0; i < sizeof(rgb); i++)
        rgb[i] = (uint8_t)(i * 7);
    assert_int_equal(dlt_png_encode(rgb, 64, 48, DLT_PNG_RGB, 8, NULL, 0, NULL, 0, &png, &len), 0);
    snprintf(p, sizeof(p), "%s/c2/zz.JPEG", root); /* a PNG named .JPEG */
    dlt_test_write(p, png, len);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_dataset_count(ds), 18);
    /* 18 images on 2 ranks, 3 batches of 3 each: one epoch reads every image once. */
    for (int r = 0; r < 2; r++) {
        dlt_loader_config c = {.batch = 3, .out = 32, .train = 1, .seed = 5, .rank = r, .world = 2, .workers = 1};
        assert_int_equal(dlt_loader_create(&l[r], ds, &c, dlt_err_fresh(&err)), 0);
        assert_int_equal(dlt_loader_start(l[r], 0, 0), 0);
        for (int s = 0; s < 3; s++)
            assert_int_equal(dlt_loader_next(l[r], img, lab, dlt_err_fresh(&err)), 0);
    }
    for (int r = 0; r < 2; r++) {
        n[r] = dlt_loader_bad_take(l[r], found[r], 16);
        for (int i = 0; i < n[r]; i++)
            assert_true(found[r][i] & DLT_LOADER_RENAMED);
    }
    assert_int_equal(n[0] + n[1], 2); /* each file met by exactly one rank */
    for (int r = 0; r < 2; r++) {
        dlt_loader_bad_merge(l[r], found[1 - r], n[1 - r]);
        dlt_loader_bad_merge(l[r], found[r], n[r]); /* own indices again: no double count */
        dlt_loader_renamed(l[r], &png_jpeg, &jpeg_png);
        assert_int_equal(png_jpeg, 1);
        assert_int_equal(jpeg_png, 1);
        assert_int_equal(dlt_loader_bad_files(l[r]), 0);
        assert_int_equal(dlt_loader_bad_images(l[r]), 0);
    }
    dlt_loader_destroy(l[0]);
    dlt_loader_destroy(l[1]);
    dlt_dataset_close(ds);
    tjFree(j);
    free(png);
    free(img);
}

/* Generated images with dlt_source_reuse_generated (bench --feed without --data): each ring slot is
 * generated once, then handed out as it is; without it every step is generated anew. */
static void test_source_reuse_generated(void **state)
{
    dlt_source a, b;
    dlt_err err = DLT_ERR_INIT;
    const size_t bytes = 2 * 32 * 32 * 3;
    uint8_t first[DLT_SOURCE_RING][2 * 32 * 32 * 3];
    (void)state;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    assert_int_equal(dlt_source_open_synthetic(&a, 2, 32, 10, 64, 7, 1, 1, 0, 1, 0, &err), 0);
    assert_int_equal(dlt_source_open_synthetic(&b, 2, 32, 10, 64, 7, 1, 1, 0, 1, 0, &err), 0);
    dlt_source_reuse_generated(&b);
    assert_int_equal(dlt_source_start(&a, 0, 0, &err), 0);
    assert_int_equal(dlt_source_start(&b, 0, 0, &err), 0);
    for (int step = 0; step < 3 * DLT_SOURCE_RING; step++) {
        const uint8_t *ia, *ib;
        const int32_t *la, *lb;
        assert_int_equal(dlt_source_acquire(&a, 0, step, &ia, &la, &err), 0);
        assert_int_equal(dlt_source_acquire(&b, 0, step, &ib, &lb, &err), 0);
        if (step < DLT_SOURCE_RING) { /* the first pass: both generate (epoch 0, step) */
            assert_memory_equal(ia, ib, bytes);
            memcpy(first[step], ib, bytes);
        } else { /* then b hands out its ring as it is, a goes on generating */
            assert_memory_equal(ib, first[step % DLT_SOURCE_RING], bytes);
            assert_memory_not_equal(ia, ib, bytes);
        }
        dlt_source_release(&a);
        dlt_source_release(&b);
    }
    dlt_source_close(&a);
    dlt_source_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loader_threads_refused),  cmocka_unit_test(test_loader),
        cmocka_unit_test(test_loader_acquire),          cmocka_unit_test(test_loader_eval_exact),
        cmocka_unit_test(test_source_reuse_generated),  cmocka_unit_test(test_loader_bad_exchange),
        cmocka_unit_test(test_loader_renamed_exchange),
    };
    int rc;
    dlt_test_dir_make("loader");
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    return dlt_test_dir_remove() == 0 ? rc : 1;
}
