/* SPDX-License-Identifier: Apache-2.0 */
/* test_cudnn_graph: the cuDNN graphs of trainer/backend/cudnn_graph.c as far as cuDNN checks them
 * without a GPU. cuDNN validates each tensor and operation descriptor when it is finalized, on the
 * host (an operation's finalize checks its tensors' shapes against the convolution's padding,
 * stride and dilation); only the operation graph needs a handle, which needs a GPU. So, with a
 * NULL handle, a graph whose every descriptor cuDNN accepts fails exactly at the graph's handle:
 * that is asserted for every convolution geometry of ResNet-50 at batch 256 (the model's own
 * planning shapes), each pattern and 16-bit type the trainer and the fusion probe build. A
 * geometry that does not add up must be refused at its operation, with cuDNN's words, and a pool
 * is bounded. Runs on a machine without a GPU (libcudnn only). */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "trainer/backend/cudnn_graph.h"
#include "trainer/model/resnet.h"

/* Built up to the graph, which refuses the missing handle: every descriptor before it was finalized. */
static void _accepted_up_to_handle(dlt_cg_pool *pool, cudnnBackendDescriptor_t g, int descriptors, const char *what)
{
    if (g != NULL || !strstr(pool->err, "CUDNN_ATTR_OPERATIONGRAPH_HANDLE") || pool->n != descriptors)
        fail_msg("%s: graph %p, %d descriptors (expected %d), last refusal: %s", what, (void *)g, pool->n, descriptors,
                 pool->err);
}

static void test_resnet50_geometries(void **state)
{
    static const cudnnDataType_t types[] = {CUDNN_DATA_HALF, CUDNN_DATA_BFLOAT16};
    dlt_model_config cfg = {.depth = 50, .width = 1.f, .image = 224, .classes = 1000, .batch = 256};
    dlt_model m;
    dlt_err err = DLT_ERR_INIT;
    int convs = 0;
    (void)state;
    snprintf(cfg.arch, sizeof(cfg.arch), "resnet50");
    assert_int_equal(dlt_model_build(&m, &cfg, &err), 0);
    for (int i = 0; i < m.nlayers; i++) {
        const dlt_layer *l = &m.layers[i];
        char what[128];
        if (l->kind != DLT_LAYER_CONV)
            continue;
        dlt_conv_shape cs = l->cs;
        if (cs.c == 3)
            cs.c = 4; /* the stem as the GPU runs it: padded to 4 channels */
        convs++;
        for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
            dlt_cg_pool pool = {.n = 0};
            /* x, dy, dw, the convolution, the operation; then the graph */
            snprintf(what, sizeof(what), "%s wgrad (type %d)", l->name, (int)types[t]);
            _accepted_up_to_handle(&pool, dlt_cg_wgrad_graph(&pool, NULL, &cs, types[t], CUDNN_DATA_FLOAT, 0), 6, what);
            dlt_cg_pool_free(&pool);
            assert_int_equal(pool.n, 0);
            /* and scale, bias, three virtual intermediates, three pointwise ops (2 descriptors each) */
            snprintf(what, sizeof(what), "%s scale/bias/relu+wgrad (type %d)", l->name, (int)types[t]);
            _accepted_up_to_handle(&pool, dlt_cg_wgrad_graph(&pool, NULL, &cs, types[t], CUDNN_DATA_FLOAT, 1), 17,
                                   what);
            dlt_cg_pool_free(&pool);
            /* the same through intermediates of the run's type, dW in it too (NVIDIA's ConvBNwgrad sample) */
            snprintf(what, sizeof(what), "%s scale/bias/relu+wgrad, low-precision (type %d)", l->name, (int)types[t]);
            _accepted_up_to_handle(&pool, dlt_cg_wgrad_graph(&pool, NULL, &cs, types[t], types[t], DLT_CG_PRO_LOWP), 17,
                                   what);
            dlt_cg_pool_free(&pool);
            /* x, w, y, sum, sqsum, the convolution, its operation, genstats; then the graph */
            snprintf(what, sizeof(what), "%s conv+genstats (type %d)", l->name, (int)types[t]);
            _accepted_up_to_handle(&pool, dlt_cg_fprop_stats_graph(&pool, NULL, &cs, types[t], 0), 9, what);
            dlt_cg_pool_free(&pool);
            /* and scale, bias, three virtual intermediates, three pointwise ops (2 descriptors each) */
            snprintf(what, sizeof(what), "%s scale/bias/relu+conv+genstats (type %d)", l->name, (int)types[t]);
            _accepted_up_to_handle(&pool, dlt_cg_fprop_stats_graph(&pool, NULL, &cs, types[t], 1), 20, what);
            dlt_cg_pool_free(&pool);
        }
    }
    assert_int_equal(convs, 53);
    dlt_model_free(&m);
}

/* An output size that does not follow from the input, padding and stride: refused where the
 * convolution's operation is finalized, with cuDNN's words, never later. */
static void test_bad_geometry_refused(void **state)
{
    dlt_conv_shape s = {8, 64, 14, 14, 128, 3, 3, 1, 1, 13, 14};
    dlt_cg_pool pool = {.n = 0};
    (void)state;
    assert_null(dlt_cg_wgrad_graph(&pool, NULL, &s, CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, 0));
    assert_non_null(strstr(pool.err, "cudnnBackendFinalize(op)"));
    assert_non_null(strstr(pool.err, "CUDNN_STATUS_BAD_PARAM"));
    dlt_cg_pool_free(&pool);
    assert_null(dlt_cg_fprop_stats_graph(&pool, NULL, &s, CUDNN_DATA_HALF, 1));
    assert_non_null(strstr(pool.err, "cudnnBackendFinalize(cop)"));
    dlt_cg_pool_free(&pool);
}

/* A pool holds DLT_CG_MAX_DESC descriptors: the next creation fails, said, and nothing leaks. */
static void test_pool_bound(void **state)
{
    dlt_conv_shape s = {8, 64, 14, 14, 128, 3, 3, 1, 1, 14, 14};
    dlt_cg_pool pool = {.n = 0};
    int builds = 0;
    (void)state;
    while (builds < 100) {
        dlt_cg_wgrad_graph(&pool, NULL, &s, CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, 0);
        builds++;
        if (strstr(pool.err, "more than"))
            break;
    }
    assert_int_equal(pool.n, DLT_CG_MAX_DESC);
    assert_int_equal(builds, DLT_CG_MAX_DESC / 6 + 1);
    dlt_cg_pool_free(&pool);
    assert_int_equal(pool.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet50_geometries),
        cmocka_unit_test(test_bad_geometry_refused),
        cmocka_unit_test(test_pool_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
