/* SPDX-License-Identifier: Apache-2.0 */
/* test_nccl_call: the trainer's one path for NCCL results, against a stand-in NCCL
 * (tests/fake_nccl) scripted to stay in progress, succeed, fail asynchronously or hang. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tests/fake_nccl/fake_nccl.h"
#include "trainer/comm/nccl_call.h"

#define COMM ((ncclComm_t)(uintptr_t)0x1234)

static void test_success_needs_no_wait(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    fake_nccl_script(0, ncclSuccess, "");
    assert_int_equal(dlt_nccl_settle(COMM, ncclSuccess, "ncclAllReduce(...)", "f.c", 1, 1.0, dlt_err_fresh(&err)), 0);
    assert_int_equal(fake_nccl_polls(), 0);
}

/* A non-blocking communicator's collective returns ncclInProgress: the call is waited out (NCCL's
 * rule), not taken for an error, and not taken for done before NCCL says so. */
static void test_in_progress_is_waited_out(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    fake_nccl_script(5, ncclSuccess, "");
    assert_int_equal(dlt_nccl_settle(COMM, ncclInProgress, "ncclAllReduce(...)", "f.c", 1, 5.0, dlt_err_fresh(&err)),
                     0);
    assert_int_equal(fake_nccl_polls(), 6);
}

static void test_in_progress_then_async_error(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    fake_nccl_script(3, ncclRemoteError, "socket recv: peer 3 closed the connection");
    assert_int_equal(
        dlt_nccl_settle(COMM, ncclInProgress, "ncclAllReduce(g, g, n)", "r.c", 42, 5.0, dlt_err_fresh(&err)), -EIO);
    assert_non_null(strstr(err.msg, "r.c:42: ncclAllReduce(g, g, n)"));
    assert_non_null(strstr(err.msg, "remote process exited"));
    assert_non_null(strstr(err.msg, "peer 3 closed the connection"));
}

static void test_immediate_error_names_nccl_message(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    fake_nccl_script(0, ncclSuccess, "ncclAllReduce: invalid root");
    assert_int_equal(dlt_nccl_settle(COMM, ncclInvalidUsage, "ncclBroadcast(...)", "c.c", 7, 5.0, dlt_err_fresh(&err)),
                     -EIO);
    assert_non_null(strstr(err.msg, "invalid usage"));
    assert_non_null(strstr(err.msg, "invalid root"));
    assert_int_equal(fake_nccl_polls(), 0);
}

static void test_stuck_in_progress_times_out(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    fake_nccl_script(1 << 30, ncclSuccess, "");
    assert_int_equal(dlt_nccl_settle(COMM, ncclInProgress, "ncclAllReduce(...)", "f.c", 1, 0.05, dlt_err_fresh(&err)),
                     -ETIMEDOUT);
    assert_non_null(strstr(err.msg, "still in progress"));
}

static void test_peer_check_and_release(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    fake_nccl_script(0, ncclSuccess, "");
    assert_int_equal(dlt_nccl_peer_check(COMM, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_nccl_release(COMM), ncclSuccess);
    assert_int_equal(fake_nccl_destroys(), 1);
    assert_int_equal(fake_nccl_aborts(), 0);
    /* A lost peer: the wait ends with NCCL's reason, and the communicator is aborted, not
     * destroyed (destroy would wait for the peer forever). */
    fake_nccl_script(0, ncclSystemError, "NET/Socket: connection closed by remote peer n2<4321>");
    assert_int_not_equal(dlt_nccl_peer_check(COMM, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "connection closed by remote peer n2"));
    assert_int_equal(dlt_nccl_release(COMM), ncclSuccess);
    assert_int_equal(fake_nccl_aborts(), 1);
    assert_int_equal(fake_nccl_destroys(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_success_needs_no_wait),        cmocka_unit_test(test_in_progress_is_waited_out),
        cmocka_unit_test(test_in_progress_then_async_error), cmocka_unit_test(test_immediate_error_names_nccl_message),
        cmocka_unit_test(test_stuck_in_progress_times_out),  cmocka_unit_test(test_peer_check_and_release),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
