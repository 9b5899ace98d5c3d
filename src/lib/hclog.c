/* hclog.c — see hclog.h. */
#include "hclog.h"
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const action_names[HC_ACTION_COUNT] = {
    [HC_START_NEW_DOMAIN] = "StartNewDomain",
    [HC_START_READY_SESSION] = "StartReadySession",
    [HC_WAIT_FOR_DOMAIN] = "WaitForDomain",
    [HC_RESTART_WAITING_DOMAIN] = "RestartWaitingDomain",
    [HC_MOUNT_STATE_ANCHOR] = "MountStateAnchor",
    [HC_CREATE_TRUST_ANCHOR] = "CreateTrustAnchor",
    [HC_LAUNCH_SIDECAR] = "LaunchSidecar",
    [HC_START_SIDECAR] = "StartSidecar",
    [HC_BOOT_SANDBOX] = "BootSandbox",
    [HC_START_SANDBOX] = "StartSandbox",
    [HC_PUBLISH_DOMAIN] = "PublishDomain",
    [HC_ADVANCE_WAITING_SESSION] = "AdvanceWaitingSession",
    [HC_REJECT_CONFIGURATION_MISMATCH] = "RejectConfigurationMismatch",
    [HC_REGISTER_SESSION] = "RegisterSession",
    [HC_DISCONNECT_SESSION] = "DisconnectSession",
    [HC_BEGIN_TEARDOWN] = "BeginTeardown",
    [HC_START_LINGER] = "StartLinger",
    [HC_STOP_SANDBOX] = "StopSandbox",
    [HC_STOP_SIDECAR] = "StopSidecar",
    [HC_UNMOUNT_STATE_ANCHOR] = "UnmountStateAnchor",
    [HC_FINISH_TEARDOWN] = "FinishTeardown",
    [HC_RECEIVE_ESCALATION] = "ReceiveEscalation",
    [HC_AUTO_APPROVE] = "AutoApprove",
    [HC_SESSION_APPROVE] = "SessionApprove",
    [HC_QUEUE_PROMPT] = "QueuePrompt",
    [HC_BEGIN_PROMPT] = "BeginPrompt",
    [HC_PROMPT_DRAWN] = "PromptDrawn",
    [HC_DISCARD_TYPEAHEAD] = "DiscardTypeahead",
    [HC_DEVELOPER_APPROVE] = "DeveloperApprove",
    [HC_DEVELOPER_APPROVE_SESSION] = "DeveloperApproveSession",
    [HC_DEVELOPER_EDIT] = "DeveloperEdit",
    [HC_DEVELOPER_DENY] = "DeveloperDeny",
    [HC_DEVELOPER_QUIT] = "DeveloperQuit",
    [HC_PROMPT_TIMEOUT] = "PromptTimeout",
    [HC_START_HOST_EXECUTION] = "StartHostExecution",
    [HC_START_HOST_EXECUTION_PIPED] = "StartHostExecutionPiped",
    [HC_FAIL_HOST_EXECUTION] = "FailHostExecution",
    [HC_TIMEOUT_HOST_EXECUTION] = "TimeoutHostExecution",
    [HC_DENY_WITHOUT_PROMPT] = "DenyWithoutPrompt",
    [HC_COMPLETE_HOST_EXECUTION] = "CompleteHostExecution",
    [HC_TIMEOUT_REQUEST] = "TimeoutRequest",
    [HC_CANCEL_REQUEST] = "CancelRequest",
    [HC_FAIL_DOMAIN] = "FailDomain",
    [HC_RESET_FAILED_DOMAIN] = "ResetFailedDomain",
};

const char *hc_action_name(enum hc_action a) { return (unsigned)a < HC_ACTION_COUNT ? action_names[a] : NULL; }

int hc_action_by_name(const char *name) {
    for (int i = 1; name && i < HC_ACTION_COUNT; i++)
        if (!strcmp(action_names[i], name))
            return i;
    return -1;
}

void hc_log(const char *fmt, ...) {
    char ts[32];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", gmtime_r(&now.tv_sec, &tm));
    fprintf(stderr, "%s.%03ld hc[%d]: ", ts, now.tv_nsec / 1000000, (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* Debug log of the protocol model's actions (docs/model/lazaret.pml), with
 * the model's action names, when LAZARET_DEBUG is set: the implementation's
 * transitions are traceable to the model (tests/integration/test_domains.py
 * checks the order). */
void hc_model_action(enum hc_action a, const char *fmt, ...) {
    static int debug = -1;
    if (debug < 0) {
        const char *e = getenv("LAZARET_DEBUG");
        debug = e && *e && strcmp(e, "0") != 0;
    }
    if (!debug)
        return;
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *b = lz_xvasprintf(fmt, ap);
    va_end(ap);
    const char *action = hc_action_name(a);
    hc_log("debug: model %s(%s)", action ? action : "?", b);
}
