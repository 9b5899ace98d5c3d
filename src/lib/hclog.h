/* hclog.h — the Host Coordinator's log, below all of its rooms
 * (coordinator.c, generation.c, bundle.c, session.c, escalation*.c,
 * escprompt.c): it depends on nothing of theirs.
 *
 * hc_log: one line on the coordinator's stderr (coordinator.log), with
 * wall-clock time and our PID.
 *
 * hc_model_action: the debug log of the protocol model's actions
 * (docs/model/lazaret.pml) when LAZARET_DEBUG is set, one line
 * "debug: model NAME(DETAIL)", NAME being the model's `inline` of that
 * action exactly (hc_action_name's table): the integration tests compare
 * these lines with the model's order of actions, so a name here changes
 * only with the model's.
 */
#pragma once

enum hc_action {
    HC_NO_ACTION, /* none (a table entry without one) */
    HC_START_NEW_DOMAIN,
    HC_START_READY_SESSION,
    HC_WAIT_FOR_DOMAIN,
    HC_RESTART_WAITING_DOMAIN,
    HC_MOUNT_STATE_ANCHOR,
    HC_CREATE_TRUST_ANCHOR,
    HC_LAUNCH_SIDECAR, /* extension: the start overlap */
    HC_START_SIDECAR,
    HC_BOOT_SANDBOX, /* extension: the start overlap */
    HC_START_SANDBOX,
    HC_PUBLISH_DOMAIN,
    HC_ADVANCE_WAITING_SESSION,
    HC_REJECT_CONFIGURATION_MISMATCH,
    HC_REGISTER_SESSION,
    HC_DISCONNECT_SESSION,
    HC_BEGIN_TEARDOWN,
    HC_START_LINGER,
    HC_STOP_SANDBOX,
    HC_STOP_SIDECAR,
    HC_UNMOUNT_STATE_ANCHOR,
    HC_FINISH_TEARDOWN,
    HC_RECEIVE_ESCALATION,
    HC_AUTO_APPROVE,
    HC_SESSION_APPROVE,
    HC_QUEUE_PROMPT,
    HC_BEGIN_PROMPT,
    HC_PROMPT_DRAWN,
    HC_DISCARD_TYPEAHEAD,
    HC_DEVELOPER_APPROVE,
    HC_DEVELOPER_APPROVE_SESSION,
    HC_DEVELOPER_EDIT,
    HC_DEVELOPER_DENY,
    HC_DEVELOPER_QUIT,
    HC_PROMPT_TIMEOUT,
    HC_START_HOST_EXECUTION,
    HC_START_HOST_EXECUTION_PIPED,
    HC_FAIL_HOST_EXECUTION,
    HC_TIMEOUT_HOST_EXECUTION,
    HC_DENY_WITHOUT_PROMPT,
    HC_COMPLETE_HOST_EXECUTION,
    HC_TIMEOUT_REQUEST,
    HC_CANCEL_REQUEST,
    HC_FAIL_DOMAIN,
    HC_RESET_FAILED_DOMAIN,
    HC_ACTION_COUNT
};

/* The model's name of a; NULL for HC_NO_ACTION and outside the enum. */
const char *hc_action_name(enum hc_action a);
/* The action named name (a model name, as the prompt reports it), or -1. */
int hc_action_by_name(const char *name);

void hc_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hc_model_action(enum hc_action a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
