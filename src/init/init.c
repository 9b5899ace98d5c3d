/* lazaret-init — PID 1 of the Agent Sandbox.
 *
 * Statically linked so it runs in any image. It announces readiness on
 * stdout (the Runtime Supervisor waits for this line before it accepts the
 * sandbox as running), reaps orphans, and exits on SIGTERM/SIGINT/SIGHUP so
 * that the sandbox stops when the supervisor asks. Sessions are separate
 * `runsc exec` processes; init never runs agent code.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    static const char ready[] = "lazaret-init: ready\n";
    if (write(1, ready, sizeof ready - 1) < 0)
        return 1;
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0)
            continue;
        if (sig == SIGCHLD) {
            while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
            continue;
        }
        return 0;
    }
}
