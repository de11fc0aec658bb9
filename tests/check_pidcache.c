// check_pidcache.c: common/pidcache.c's getpid() is the process's pid, also in a forked
// child (libzmq's fork detection depends on that), and it is the definition every shared
// library binds to (the point of it: libzmq's wake-ups make no getpid system call).
#define _GNU_SOURCE // RTLD_DEFAULT
#include "check_apex.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t s_kernel_pid(void) { return (pid_t)syscall(SYS_getpid); }

START_TEST(test_pid_matches_kernel) {
    // Check runs this test in a child it forked: the cache was refreshed by the fork.
    ck_assert_int_eq(getpid(), s_kernel_pid());
}
END_TEST

START_TEST(test_child_of_fork_sees_its_own_pid) {
    pid_t parent = getpid();
    pid_t c = fork();
    ck_assert_int_ge(c, 0);
    if (c == 0) {
        // Exit status 0 only when the cached value is the child's pid, not the parent's.
        _exit(getpid() == s_kernel_pid() && getpid() != parent ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(c, &status, 0), c);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ck_assert_int_eq(getpid(), parent);
}
END_TEST

START_TEST(test_interposes_libc_for_shared_libraries) {
    // Shared libraries (libzmq) resolve getpid in the global scope, where the executable
    // comes first: that lookup must find this definition, not libc's.
    void *global = dlsym(RTLD_DEFAULT, "getpid");
    void *libc = dlsym(RTLD_NEXT, "getpid");
    ck_assert_ptr_nonnull(global);
    ck_assert_ptr_nonnull(libc);
    ck_assert_ptr_eq(global, (void *)getpid);
    ck_assert_ptr_ne(global, libc);
}
END_TEST

Suite *pidcache_suite(void) {
    Suite *s = suite_create("pidcache");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_pid_matches_kernel);
    tcase_add_test(tc, test_child_of_fork_sees_its_own_pid);
    tcase_add_test(tc, test_interposes_libc_for_shared_libraries);
    suite_add_tcase(s, tc);
    return s;
}
