/*
 * lazaret.pml -- Promela model of Lazaret's application protocol.
 *
 * Our own rendering of the TLA+ module `Lazaret` (docs/protocol/Lazaret.tla
 * and docs/protocol/Lazaret.cfg in the specification seed
 * 000-spec-reorganization): the same state variables, the same actions
 * (each one an `inline` named exactly after the TLA+ action, whose body is a
 * single `d_step`, i.e. one atomic transition), the same twelve invariants
 * and the same four liveness properties, under the same weak fairness.
 *
 * Extended ahead of the implementation (marked "extension" throughout; not
 * in the TLA+ model): the host-escalation prompt in detail (the prompt is
 * drawn and settles before keys count, keys typed ahead are discarded,
 * [e]dit shows the edited argv again for a new [a], [s] approves the exact
 * request identity for the rest of the Client Session, [q] denies and ends
 * the session, the prompt times out as a denial), cancellation from the
 * sandbox, and the Domain's warm linger after its last session. The
 * developer's keys carry no fairness (TLA+ has DeveloperApprove/Deny in
 * RequestProgress): every prompt must end by its time-out alone.
 *
 * Checked by tests/model/check.sh; see docs/model/README.md.
 *
 * Encoding rules
 *   - Every TLA+ action A(x) == /\ guard /\ effect becomes
 *       inline A(x) { d_step { guard -> effect } }
 *     so one TLA+ step is one Promela transition; variables the TLA+ action
 *     leaves UNCHANGED are not touched.
 *   - Spec's fairness  \A d : WF_vars(DomainProgress(d)),
 *                      \A s : WF_vars(SessionProgress(s)),
 *                      \A r : WF_vars(RequestProgress(r))
 *     becomes one process per conjunct whose loop offers exactly the
 *     disjuncts of that Progress formula (DomainProc(d), SessionProc(s),
 *     RequestProc(r)); pan's weak fairness (-f) then says: a process that is
 *     continuously enabled eventually moves, which is WF of the disjunction.
 *   - The actions of Next outside every Progress formula (DisconnectSession,
 *     FailDomain, ReceiveEscalation) carry no fairness in Spec. They live in
 *     one Environment process that can also stutter, so pan's
 *     per-process fairness never forces them to happen. So do the
 *     extension's unfair actions: CancelRequest and the developer's keys.
 *   - Every process loop head is an end state: Lazaret.cfg has
 *     CHECK_DEADLOCK FALSE ("fully closed or failed application states
 *     intentionally have no successor").
 *
 * Build-time switches (spin -D...):
 *   FIXTURE_WIDE         extra fixture, not the seed's: adds Domain D2 with
 *                        session S3 and request R4 (authenticated, ShellCmd,
 *                        an auto-approval rule matches).
 *   FIXTURE_MISMATCH     extra fixture, not the seed's: S2 carries another
 *                        Configuration Fingerprint ("config-b") so that
 *                        RejectConfigurationMismatch becomes reachable.
 *   FIXTURE_ESC          extra fixture, not the seed's: three authenticated
 *                        prompted requests, R1 and R2 of one identity in
 *                        S1, R3 of that identity in S2 (the [s] approval
 *                        is used, and must not cross sessions).
 *   ESC_OTHER_IDENTITY   with FIXTURE_ESC: R2 is another identity (ShellCmd)
 *                        in S1 (an [s] approval must not cover it).
 *   TLA_INVARIANTS_ONLY  the monitor asserts the twelve TLA+ invariants only
 *                        (used to show what the extras add).
 *   NO_STUTTER           drop the Environment's stutter step so that a state
 *                        without successors is visible to the monitor's
 *                        `timeout` check (QuiescentStateClean). Used by the
 *                        safety run; reachable states are the same.
 *   BUG_TEARDOWN_ORDER   deliberately broken: StopSidecar no longer waits
 *                        for the sandbox to stop (self-test, must fail
 *                        OrderedNetworkStartup).
 *   BUG_ANCHOR_ORDER     deliberately broken: UnmountStateAnchor no longer
 *                        waits for the sandbox and the sidecar to stop
 *                        (self-test, must fail ResourceNesting; none of the
 *                        twelve TLA+ invariants sees it).
 *   BUG_UNAUTHENTICATED  deliberately broken: ReceiveEscalation ignores the
 *                        certificate and signature (self-test, must fail
 *                        AuthenticatedRequestsOnly).
 *   BUG_AUTO_SHELL       deliberately broken: AutoApprove no longer refuses
 *                        a command that needs a shell (self-test, must fail
 *                        AutoApprovalNoShell on FIXTURE_WIDE; the seed
 *                        fixture cannot see it, its only shell request R3
 *                        is unauthenticated).
 *   BUG_NO_PROMPT_TIMEOUT deliberately broken: the prompt never times out
 *                        (self-test, must fail PromptEventuallyEnds and
 *                        RequestEventuallyResolves: the developer may
 *                        never answer).
 *   BUG_NO_TEARDOWN      deliberately broken: BeginTeardown never happens,
 *                        i.e. the linger never expires (self-test, must fail
 *                        EmptyDomainStopsWhenIdle and DomainEventuallyStops).
 *   BUG_EDIT_NO_CONFIRM  deliberately broken: [e] approves the edited argv
 *                        without showing it again (must fail
 *                        ExecutedEqualsApproved).
 *   BUG_EXEC_ORIGINAL    deliberately broken: the host process runs the
 *                        request's argv, not the approved (edited) one (must
 *                        fail ExecutedEqualsApproved).
 *   BUG_TYPEAHEAD        deliberately broken: [a] counts before the prompt is
 *                        drawn and settled (must fail ApprovalOnlyAfterDraw).
 *   BUG_GRANT_ANY_SESSION deliberately broken: an [s] approval of any
 *                        session matches (FIXTURE_ESC; must fail
 *                        SessionApprovalScoped).
 *   BUG_GRANT_ANY_IDENTITY deliberately broken: any [s] approval of the
 *                        session matches any request of it (FIXTURE_ESC with
 *                        ESC_OTHER_IDENTITY; must fail SessionApprovalScoped).
 *   BUG_GRANT_OUTLIVES_SESSION deliberately broken: DisconnectSession keeps
 *                        the session's [s] approvals (must fail
 *                        SessionApprovalScoped).
 *   BUG_CANCEL_ORPHAN    deliberately broken: CancelRequest leaves the host
 *                        process running (must fail NoOrphanHostProcess).
 *   BUG_DISCONNECT_ORPHAN deliberately broken: DisconnectSession leaves the
 *                        host process running (must fail NoOrphanHostProcess).
 *   BUG_LINGER_NO_CANCEL deliberately broken: a join does not cancel the
 *                        linger (must fail LingerOnlyWhenIdle).
 *   BUG_PROMPT_LEAK      deliberately broken: PromptTimeout leaves the prompt
 *                        state (drawn, edited) behind (must fail
 *                        PromptStateClosed).
 *   BUG_HELPER_ROUTES    deliberately broken: the connectivity helper
 *                        configures its own route out of the enforcement
 *                        namespace when it starts (slirp4netns --configure),
 *                        before the policy replaces it, while the sandbox
 *                        boots beside it (must fail EgressOnlyThroughPolicy).
 *   BUG_READY_BEFORE_POLICY deliberately broken: the booted sandbox is ready
 *                        without waiting for the network sidecar (must fail
 *                        OrderedNetworkStartup).
 */

/* ---------------------------------------------------------------------
 * Fixture: Lazaret.cfg (DomainsFixture, SessionsFixture, ...)
 * ------------------------------------------------------------------- */

#if defined(FIXTURE_WIDE)
/* Extra fixture, NOT the seed's: a second Domain D2 with one session S3 and
 * one authenticated request R4 for a command that needs a shell although an
 * auto-approval rule matches it. */
#define ND 2
#define NS 3
#define NR 4
#elif defined(FIXTURE_ESC)
/* Extra fixture, NOT the seed's: one Domain, two sessions, three
 * authenticated requests without an auto rule, for the session-scoped
 * approval ([s]): R1 and R2 are the same request identity (PromptCmd) in
 * S1, R3 is that identity in the other session S2. With ESC_OTHER_IDENTITY,
 * R2 is another identity (ShellCmd) in the same session as R1. */
#define ND 1
#define NS 2
#define NR 3
#else
#define ND 1                    /* DomainsFixture  == {D1}                */
#define NS 2                    /* SessionsFixture == {S1, S2}            */
#define NR 3                    /* RequestsFixture == {R1, R2, R3}        */
#endif
#define NC 4                    /* CommandsFixture == {ExactCmd, PromptCmd, ShellCmd, EditedCmd} */

#define D1 0
#define D2 1                    /* FIXTURE_WIDE only */
#define S1 0
#define S2 1
#define S3 2                    /* FIXTURE_WIDE only */
#define R1 0
#define R2 1
#define R3 2
#define R4 3                    /* FIXTURE_WIDE only */
#define ExactCmd  0
#define PromptCmd 1
#define ShellCmd  2
#define EditedCmd 3             /* what [e]dit produces from any request's argv */

#define NoSession NS            /* NoSession \notin Sessions */
#define NoRequest NR            /* NoRequest \notin Requests */
#define NoCommand NC            /* NoCommand \notin Commands */

#define CONFIG_A 1              /* the string "config-a" */
#define CONFIG_B 2              /* the string "config-b" (FIXTURE_MISMATCH only) */

/* SessionDomainFixture == (S1 :> D1) @@ (S2 :> D1)      [wide: S3 :> D2] */
#if defined(FIXTURE_WIDE)
#define SessionDomain(s)        (((s) == S3) -> D2 : D1)
#else
#define SessionDomain(s)        D1
#endif
/* SessionFingerprintFixture == (S1 :> "config-a") @@ (S2 :> "config-a")
 *                                         [mismatch: S2 :> "config-b"] */
#if defined(FIXTURE_MISMATCH)
#define SessionFingerprint(s)   (((s) == S2) -> CONFIG_B : CONFIG_A)
#else
#define SessionFingerprint(s)   CONFIG_A
#endif
/* DomainFingerprintFixture == D1 :> "config-a"          [wide: D2 :> "config-a"] */
#define DomainFingerprint(d)    CONFIG_A
/* ConfigSafeFixture == D1 :> TRUE                       [wide: D2 :> TRUE] */
#define ConfigSafe(d)           true
#if defined(FIXTURE_ESC)
/* esc: R1 :> S1, R2 :> S1, R3 :> S2 */
#define RequestSession(r)       (((r) == R3) -> S2 : S1)
#if defined(ESC_OTHER_IDENTITY)
/* esc, other identity: R1, R3 :> PromptCmd, R2 :> ShellCmd */
#define RequestCommand(r)       (((r) == R2) -> ShellCmd : PromptCmd)
#else
/* esc: R1, R2, R3 :> PromptCmd (one identity) */
#define RequestCommand(r)       PromptCmd
#endif
/* esc: every request authenticated, no auto rule matches */
#define CertificateValid(r)     true
#define SignatureValid(r)       true
#define AutoRuleMatches(r)      false
#else
/* RequestSessionFixture == (R1 :> S1) @@ (R2 :> S2) @@ (R3 :> S1)   [wide: R4 :> S3] */
#define RequestSession(r)       (((r) == R2) -> S2 : (((r) == R4) -> S3 : S1))
/* RequestCommandFixture == (R1 :> ExactCmd) @@ (R2 :> PromptCmd) @@ (R3 :> ShellCmd)
 *                                                       [wide: R4 :> ShellCmd] */
#define RequestCommand(r)       (((r) == R1) -> ExactCmd : (((r) == R2) -> PromptCmd : ShellCmd))
/* CertificateValidFixture == (R1 :> TRUE) @@ (R2 :> TRUE) @@ (R3 :> FALSE)  [wide: R4 :> TRUE] */
#define CertificateValid(r)     ((r) != R3)
/* SignatureValidFixture == (R1 :> TRUE) @@ (R2 :> TRUE) @@ (R3 :> FALSE)    [wide: R4 :> TRUE] */
#define SignatureValid(r)       ((r) != R3)
/* AutoRuleMatchesFixture == (R1 :> TRUE) @@ (R2 :> FALSE) @@ (R3 :> TRUE)   [wide: R4 :> TRUE] */
#define AutoRuleMatches(r)      ((r) != R2)
#endif
/* CommandRequiresShellFixture: only ShellCmd is TRUE */
#define CommandRequiresShell(c) ((c) == ShellCmd)

/* Quantifiers over the finite fixture sets, unrolled for the sizes above.
 * P is a two-argument predicate macro P(element, extra). */
#if defined(FIXTURE_WIDE)
#define ALL_D(P, a) (P(0, a) && P(1, a))
#define ALL_S(P, a) (P(0, a) && P(1, a) && P(2, a))
#define ALL_R(P, a) (P(0, a) && P(1, a) && P(2, a) && P(3, a))
#else
#define ALL_D(P, a) (P(0, a))
#define ALL_S(P, a) (P(0, a) && P(1, a))
#define ALL_R(P, a) (P(0, a) && P(1, a) && P(2, a))
#endif

/* ---------------------------------------------------------------------
 * Value sets (DomainPhases, CoordinatorStates, ...). The TLA+ strings get a
 * prefix naming their set because Promela has one mtype name space:
 *   D_ DomainPhases        C_ CoordinatorStates   M_ MountStates
 *   X_ ResourceStates      S_ SessionPhases       T_ TerminalRoutes
 *   K_ ConnectionStates    Q_ RequestPhases       A_ ApprovalSources
 * ------------------------------------------------------------------- */

mtype = {
    D_Absent, D_Starting, D_Ready, D_Stopping, D_Failed,
    C_Absent, C_Starting, C_Ready, C_Stopping, C_Failed,
    M_Unmounted, M_Mounted,
    X_Stopped, X_Ready, X_Failed,
    S_New, S_Waiting, S_Registering, S_Attached, S_Prompting,
    S_HostExecuting, S_Closed, S_Failed,
    T_Detached, T_Sandbox, T_Prompt, T_HostProcess,
    K_Disconnected, K_Connected,
    Q_Unused, Q_Verified, Q_AwaitingApproval, Q_Approved, Q_Executing,
    Q_Completed, Q_Denied, Q_TimedOut, Q_Cancelled, Q_Failed,
    A_NoApproval, A_AutoRule, A_Developer,
    A_SessionGrant      /* extension: a session-scoped approval ([s]) matched */
};

/* ---------------------------------------------------------------------
 * VARIABLES, with Init as their initial values.
 * ------------------------------------------------------------------- */

typedef SessionSet { bool has[NS] };    /* a subset of Sessions */

mtype domainPhase[ND]      = D_Absent;        /* [d |-> "Absent"]      */
mtype coordinatorState[ND] = C_Absent;        /* [d |-> "Absent"]      */
mtype stateAnchorState[ND] = M_Unmounted;     /* [d |-> "Unmounted"]   */
mtype sidecarState[ND]     = X_Stopped;       /* [d |-> "Stopped"]     */
mtype sandboxState[ND]     = X_Stopped;       /* [d |-> "Stopped"]     */
bool  trustReady[ND];                         /* [d |-> FALSE]         */
byte  lockOwner[ND]        = NoSession;       /* [d |-> NoSession]     */
bool  published[ND];                          /* {}                    */
SessionSet registered[ND];                    /* [d |-> {}]            */
SessionSet connected[ND];                     /* [d |-> {}]            */
mtype sessionPhase[NS]     = S_New;           /* [s |-> "New"]         */
mtype terminalRoute[NS]    = T_Detached;      /* [s |-> "Detached"]    */
mtype connectionState[NS]  = K_Disconnected;  /* [s |-> "Disconnected"]*/
byte  activeRequest[NS]    = NoRequest;       /* [s |-> NoRequest]     */
mtype requestPhase[NR]     = Q_Unused;        /* [r |-> "Unused"]      */
mtype approvalSource[NR]   = A_NoApproval;    /* [r |-> NoApproval]    */
byte  approvedCommand[NR]  = NoCommand;       /* [r |-> NoCommand]     */
bool  hostRunning[NR];                        /* {}                    */

/* Extension (not in the TLA+ model): host-escalation prompt details, the
 * session-scoped approval and the warm linger. Each is reset as soon as it
 * no longer matters, so finished requests and closed sessions leave no
 * residue that would multiply the state space. */
bool  promptDrawn[NS];      /* the session's prompt is fully drawn and its
                               settle delay has passed: keys are accepted */
bool  promptEdited[NS];     /* the prompt shows the edited argv (EditedCmd)
                               instead of the request's own */
byte  sessionGrant[NS];     /* [s] approvals of the session: bit c set =
                               request identity (command) c is approved for
                               the rest of this Client Session */
byte  execCommand[NR] = NoCommand; /* the argv the host process runs */
bool  lingering[ND];        /* the Domain is Ready, idle, in its linger period */
/* Extension, start overlap: the network sidecar and the sandbox start side
 * by side. sidecarLaunched: the connectivity helper runs (it has made its
 * tap device), the policy is not in place yet (sidecarState is Ready only
 * once the policy is installed, read back and probed). sandboxBooting: runsc
 * boots, its processes exist in the enforcement namespace, it is not ready.
 * routeOut: the enforcement namespace has a route out that is not the
 * policy's (only the helper's own configuration makes one:
 * BUG_HELPER_ROUTES); the policy's routes are sidecarState == X_Ready. */
bool  sidecarLaunched[ND];
bool  sandboxBooting[ND];
bool  routeOut[ND];
/* ghosts: observe the developer's approval key press, no protocol effect */
byte  confirmedCommand[NR] = NoCommand; /* argv on screen at [a]/[s] */
bool  approvalDrawn[NR];    /* [a]/[s] was accepted on a drawn, settled prompt */

hidden byte ii;     /* loop index inside d_step only; not part of the state */
hidden byte stutter; /* target of the Environment's stuttering step; not part of the state */

/* ---------------------------------------------------------------------
 * Operators
 * ------------------------------------------------------------------- */

#define Dom(s)          SessionDomain(s)
#define ReqSession(r)   RequestSession(r)
#define ReqDomain(r)    Dom(ReqSession(r))

/* TerminalRequestPhases */
#define TerminalRequestPhase(p) \
    ((p) == Q_Completed || (p) == Q_Denied || (p) == Q_TimedOut || \
     (p) == Q_Cancelled || (p) == Q_Failed)
#define IsTerminalRequest(r)    TerminalRequestPhase(requestPhase[r])

/* the phases that make a session a member of Interested(d) */
#define InterestedPhase(p) \
    ((p) == S_Waiting || (p) == S_Registering || (p) == S_Attached || \
     (p) == S_Prompting || (p) == S_HostExecuting)
#define InterestedIn(s, d)      (Dom(s) == (d) && InterestedPhase(sessionPhase[s]))
#define NotInterestedIn(s, d)   (!InterestedIn(s, d))
/* Interested(d) = {} */
#define NoneInterested(d)       ALL_S(NotInterestedIn, d)
#define NotRegistered(s, d)     (!registered[d].has[s])
#define NotConnected(s, d)      (!connected[d].has[s])
#define IdleDomain(d)           (NoneInterested(d) && ALL_S(NotRegistered, d) && \
                                 ALL_S(NotConnected, d))

/* Extension: the prompt and the session-scoped approval. */
/* the argv the prompt of session s shows for its request r */
#define Shown(s, r)             (promptEdited[s] -> EditedCmd : RequestCommand(r))
#define GrantBit(c)             (1 << (c))
#define GrantHas(s, c)          (((sessionGrant[s] >> (c)) & 1) == 1)
#define NoGrantFor(s, c)        (!GrantHas(s, c))
/* an [s] approval covers request r: its own session granted its exact identity */
#if defined(BUG_GRANT_ANY_SESSION)
#define Granted(r)              (!ALL_S(NoGrantFor, RequestCommand(r)))
#elif defined(BUG_GRANT_ANY_IDENTITY)
#define Granted(r)              (sessionGrant[ReqSession(r)] != 0)
#else
#define Granted(r)              GrantHas(ReqSession(r), RequestCommand(r))
#endif
/* the prompt closes: nothing of it survives into the next prompt */
#define ClosePrompt(s)          promptDrawn[s] = false; promptEdited[s] = false

/* ---------------------------------------------------------------------
 * Action coverage (like TLC's coverage report). With spin -DCOVERAGE each
 * action counts the transitions pan explores through it and pan prints
 * "coverage <Action> <count>" when it exits; the counters live outside the
 * state vector and do not change the search.
 * ------------------------------------------------------------------- */

#define ACT_StartNewDomain 0
#define ACT_StartReadySession 1
#define ACT_WaitForDomain 2
#define ACT_RestartWaitingDomain 3
#define ACT_MountStateAnchor 4
#define ACT_CreateTrustAnchor 5
#define ACT_StartSidecar 6
#define ACT_StartSandbox 7
#define ACT_PublishDomain 8
#define ACT_AdvanceWaitingSession 9
#define ACT_RejectConfigurationMismatch 10
#define ACT_RegisterSession 11
#define ACT_DisconnectSession 12
#define ACT_BeginTeardown 13
#define ACT_StopSandbox 14
#define ACT_StopSidecar 15
#define ACT_UnmountStateAnchor 16
#define ACT_FinishTeardown 17
#define ACT_ReceiveEscalation 18
#define ACT_AutoApprove 19
#define ACT_QueuePrompt 20
#define ACT_BeginPrompt 21
#define ACT_DeveloperApprove 22
#define ACT_DeveloperDeny 23
#define ACT_StartHostExecution 24
#define ACT_CompleteHostExecution 25
#define ACT_TimeoutRequest 26
#define ACT_FailDomain 27
#define ACT_ResetFailedDomain 28
/* extension: actions not in the TLA+ model */
#define ACT_StartLinger 29
#define ACT_SessionApprove 30
#define ACT_PromptDrawn 31
#define ACT_DiscardTypeahead 32
#define ACT_DeveloperEdit 33
#define ACT_DeveloperApproveSession 34
#define ACT_DeveloperQuit 35
#define ACT_PromptTimeout 36
#define ACT_CancelRequest 37
#define ACT_StartHostExecutionPiped 38
#define ACT_FailHostExecution 39
#define ACT_TimeoutHostExecution 40
#define ACT_DenyWithoutPrompt 41
#define ACT_LaunchSidecar 42
#define ACT_BootSandbox 43
#define N_ACTIONS 44

#ifdef COVERAGE
c_decl {
    static const char *lz_action_name[N_ACTIONS] = {
        "StartNewDomain",
        "StartReadySession",
        "WaitForDomain",
        "RestartWaitingDomain",
        "MountStateAnchor",
        "CreateTrustAnchor",
        "StartSidecar",
        "StartSandbox",
        "PublishDomain",
        "AdvanceWaitingSession",
        "RejectConfigurationMismatch",
        "RegisterSession",
        "DisconnectSession",
        "BeginTeardown",
        "StopSandbox",
        "StopSidecar",
        "UnmountStateAnchor",
        "FinishTeardown",
        "ReceiveEscalation",
        "AutoApprove",
        "QueuePrompt",
        "BeginPrompt",
        "DeveloperApprove",
        "DeveloperDeny",
        "StartHostExecution",
        "CompleteHostExecution",
        "TimeoutRequest",
        "FailDomain",
        "ResetFailedDomain",
        "StartLinger",
        "SessionApprove",
        "PromptDrawn",
        "DiscardTypeahead",
        "DeveloperEdit",
        "DeveloperApproveSession",
        "DeveloperQuit",
        "PromptTimeout",
        "CancelRequest",
        "StartHostExecutionPiped",
        "FailHostExecution",
        "TimeoutHostExecution",
        "DenyWithoutPrompt",
        "LaunchSidecar",
        "BootSandbox"
    };
    static unsigned long lz_action_count[N_ACTIONS];
    static int lz_cover_armed;
    static void lz_cover_dump(void)
    {
        int k;
        for (k = 0; k < N_ACTIONS; k++)
            printf("coverage %s %lu\n", lz_action_name[k], lz_action_count[k]);
    }
}
#define COVER(k) c_code { if (!lz_cover_armed) { lz_cover_armed = 1; atexit(lz_cover_dump); } lz_action_count[k]++; }
#else
#define COVER(k) skip
#endif

/* ---------------------------------------------------------------------
 * Domain and Session lifecycle
 * ------------------------------------------------------------------- */

/* TLA+: StartNewDomain(s) */
inline StartNewDomain(s) {
    d_step {
        sessionPhase[s] == S_New &&
        ConfigSafe(Dom(s)) &&
        domainPhase[Dom(s)] == D_Absent
        ->
        domainPhase[Dom(s)] = D_Starting;
        coordinatorState[Dom(s)] = C_Starting;
        lockOwner[Dom(s)] = s;
        sessionPhase[s] = S_Waiting;
        COVER(ACT_StartNewDomain);
        printf("ACTION StartNewDomain(s%d)\n", s)
    }
}

/* TLA+: StartReadySession(s) */
inline StartReadySession(s) {
    d_step {
        sessionPhase[s] == S_New &&
        domainPhase[Dom(s)] == D_Ready &&
        SessionFingerprint(s) == DomainFingerprint(Dom(s))
        ->
        sessionPhase[s] = S_Registering;
        connectionState[s] = K_Connected;
#ifndef BUG_LINGER_NO_CANCEL
        lingering[Dom(s)] = false;  /* extension: a join cancels the linger */
#endif
        COVER(ACT_StartReadySession);
        printf("ACTION StartReadySession(s%d)\n", s)
    }
}

/* TLA+: WaitForDomain(s) */
inline WaitForDomain(s) {
    d_step {
        sessionPhase[s] == S_New &&
        (domainPhase[Dom(s)] == D_Starting || domainPhase[Dom(s)] == D_Stopping)
        ->
        sessionPhase[s] = S_Waiting;
        COVER(ACT_WaitForDomain);
        printf("ACTION WaitForDomain(s%d)\n", s)
    }
}

/* TLA+: RestartWaitingDomain(s) */
inline RestartWaitingDomain(s) {
    d_step {
        sessionPhase[s] == S_Waiting &&
        ConfigSafe(Dom(s)) &&
        domainPhase[Dom(s)] == D_Absent
        ->
        domainPhase[Dom(s)] = D_Starting;
        coordinatorState[Dom(s)] = C_Starting;
        lockOwner[Dom(s)] = s;
        COVER(ACT_RestartWaitingDomain);
        printf("ACTION RestartWaitingDomain(s%d)\n", s)
    }
}

/* TLA+: MountStateAnchor(d) */
inline MountStateAnchor(d) {
    d_step {
        domainPhase[d] == D_Starting &&
        coordinatorState[d] == C_Starting &&
        stateAnchorState[d] == M_Unmounted
        ->
        stateAnchorState[d] = M_Mounted;
        COVER(ACT_MountStateAnchor);
        printf("ACTION MountStateAnchor(d%d)\n", d)
    }
}

/* TLA+: CreateTrustAnchor(d) */
inline CreateTrustAnchor(d) {
    d_step {
        domainPhase[d] == D_Starting &&
        coordinatorState[d] == C_Starting &&
        !trustReady[d]
        ->
        trustReady[d] = true;
        COVER(ACT_CreateTrustAnchor);
        printf("ACTION CreateTrustAnchor(d%d)\n", d)
    }
}

/* Extension: the start overlap. TLA+'s StartSidecar and StartSandbox are
 * each split in two: LaunchSidecar (the connectivity helper started, its
 * tap made, no route out) and StartSidecar (the policy installed, read
 * back and probed: network readiness); BootSandbox (runsc released: the
 * sandbox's processes exist in the enforcement namespace, beside the
 * helper's start) and StartSandbox (its init is ready, and the sidecar is:
 * the readiness the coordinator commits). The TLA+ order of the two
 * Ready transitions is unchanged (OrderedNetworkStartup); what runs side
 * by side is the helper's start and the policy install with runsc's boot,
 * which is safe only because no route leaves the namespace before the
 * policy is in place (EgressOnlyThroughPolicy). */
inline LaunchSidecar(d) {
    d_step {
        domainPhase[d] == D_Starting &&
        stateAnchorState[d] == M_Mounted &&
        trustReady[d] &&
        sidecarState[d] == X_Stopped &&
        !sidecarLaunched[d]
        ->
        sidecarLaunched[d] = true;
#ifdef BUG_HELPER_ROUTES
        routeOut[d] = true;     /* slirp4netns --configure: its default route */
#endif
        COVER(ACT_LaunchSidecar);
        printf("ACTION LaunchSidecar(d%d)\n", d)
    }
}

/* TLA+: StartSidecar(d); extension: after LaunchSidecar, and the policy's
 * routes replace whatever route the helper made. */
inline StartSidecar(d) {
    d_step {
        domainPhase[d] == D_Starting &&
        stateAnchorState[d] == M_Mounted &&
        trustReady[d] &&
        sidecarState[d] == X_Stopped &&
        sidecarLaunched[d]
        ->
        sidecarState[d] = X_Ready;
        sidecarLaunched[d] = false;
        routeOut[d] = false;
        COVER(ACT_StartSidecar);
        printf("ACTION StartSidecar(d%d)\n", d)
    }
}

/* Extension: runsc boots once the helper is launched (its start runs
 * beside the boot), before the policy is in place. */
inline BootSandbox(d) {
    d_step {
        domainPhase[d] == D_Starting &&
        stateAnchorState[d] == M_Mounted &&
        trustReady[d] &&
        (sidecarLaunched[d] || sidecarState[d] == X_Ready) &&
        sandboxState[d] == X_Stopped &&
        !sandboxBooting[d]
        ->
        sandboxBooting[d] = true;
        COVER(ACT_BootSandbox);
        printf("ACTION BootSandbox(d%d)\n", d)
    }
}

/* TLA+: StartSandbox(d); extension: the booted sandbox's readiness. */
inline StartSandbox(d) {
    d_step {
        domainPhase[d] == D_Starting &&
#ifndef BUG_READY_BEFORE_POLICY
        sidecarState[d] == X_Ready &&
#endif
        sandboxState[d] == X_Stopped &&
        sandboxBooting[d]
        ->
        sandboxState[d] = X_Ready;
        sandboxBooting[d] = false;
        COVER(ACT_StartSandbox);
        printf("ACTION StartSandbox(d%d)\n", d)
    }
}

/* TLA+: PublishDomain(d) */
inline PublishDomain(d) {
    d_step {
        domainPhase[d] == D_Starting &&
        coordinatorState[d] == C_Starting &&
        stateAnchorState[d] == M_Mounted &&
        sidecarState[d] == X_Ready &&
        sandboxState[d] == X_Ready &&
        trustReady[d]
        ->
        domainPhase[d] = D_Ready;
        coordinatorState[d] = C_Ready;
        lockOwner[d] = NoSession;
        published[d] = true;
        COVER(ACT_PublishDomain);
        printf("ACTION PublishDomain(d%d)\n", d)
    }
}

/* TLA+: AdvanceWaitingSession(s) */
inline AdvanceWaitingSession(s) {
    d_step {
        sessionPhase[s] == S_Waiting &&
        domainPhase[Dom(s)] == D_Ready &&
        SessionFingerprint(s) == DomainFingerprint(Dom(s))
        ->
        sessionPhase[s] = S_Registering;
        connectionState[s] = K_Connected;
#ifndef BUG_LINGER_NO_CANCEL
        lingering[Dom(s)] = false;  /* extension: a join cancels the linger */
#endif
        COVER(ACT_AdvanceWaitingSession);
        printf("ACTION AdvanceWaitingSession(s%d)\n", s)
    }
}

/* TLA+: RejectConfigurationMismatch(s) */
inline RejectConfigurationMismatch(s) {
    d_step {
        (sessionPhase[s] == S_New || sessionPhase[s] == S_Waiting) &&
        domainPhase[Dom(s)] == D_Ready &&
        SessionFingerprint(s) != DomainFingerprint(Dom(s))
        ->
        sessionPhase[s] = S_Failed;
        terminalRoute[s] = T_Detached;
        connectionState[s] = K_Disconnected;
        COVER(ACT_RejectConfigurationMismatch);
        printf("ACTION RejectConfigurationMismatch(s%d)\n", s)
    }
}

/* TLA+: RegisterSession(s) */
inline RegisterSession(s) {
    d_step {
        sessionPhase[s] == S_Registering &&
        connectionState[s] == K_Connected &&
        domainPhase[Dom(s)] == D_Ready &&
        SessionFingerprint(s) == DomainFingerprint(Dom(s))
        ->
        registered[Dom(s)].has[s] = true;
        connected[Dom(s)].has[s] = true;
        sessionPhase[s] = S_Attached;
        terminalRoute[s] = T_Sandbox;
        COVER(ACT_RegisterSession);
        printf("ACTION RegisterSession(s%d)\n", s)
    }
}

/* TLA+: DisconnectSession(s)   (no fairness in Spec) */
inline DisconnectSession(s) {
    d_step {
        InterestedPhase(sessionPhase[s])
        ->
        registered[Dom(s)].has[s] = false;
        connected[Dom(s)].has[s] = false;
        sessionPhase[s] = S_Closed;
        terminalRoute[s] = T_Detached;
        connectionState[s] = K_Disconnected;
        /* r == activeRequest[s] */
        if
        :: activeRequest[s] != NoRequest ->
            if
            :: !IsTerminalRequest(activeRequest[s]) ->
                requestPhase[activeRequest[s]] = Q_Cancelled
            :: else -> skip
            fi;
#ifndef BUG_DISCONNECT_ORPHAN
            execCommand[activeRequest[s]] = NoCommand;  /* extension */
            hostRunning[activeRequest[s]] = false
#else
            skip
#endif
        :: else -> skip
        fi;
        activeRequest[s] = NoRequest;
        /* extension: the prompt closes, the session's [s] approvals end */
        ClosePrompt(s);
#ifndef BUG_GRANT_OUTLIVES_SESSION
        sessionGrant[s] = 0;
#endif
        COVER(ACT_DisconnectSession);
        printf("ACTION DisconnectSession(s%d)\n", s)
    }
}

/* TLA+: BeginTeardown(d) */
inline BeginTeardown(d) {
    d_step {
        domainPhase[d] == D_Ready &&
        NoneInterested(d) &&
        ALL_S(NotRegistered, d) &&
        ALL_S(NotConnected, d) &&
        lingering[d] &&     /* extension: only when the linger period ends */
#ifdef BUG_NO_TEARDOWN
        false &&
#endif
        true
        ->
        domainPhase[d] = D_Stopping;
        coordinatorState[d] = C_Stopping;
        published[d] = false;
        lingering[d] = false;
        COVER(ACT_BeginTeardown);
        printf("ACTION BeginTeardown(d%d)\n", d)
    }
}

/* Extension: StartLinger(d). The last session has left a Ready Domain: it
 * keeps running for a linger period. BeginTeardown is the end of that
 * period; a session joining meanwhile (StartReadySession) cancels it. */
inline StartLinger(d) {
    d_step {
        domainPhase[d] == D_Ready &&
        !lingering[d] &&
        IdleDomain(d)
        ->
        lingering[d] = true;
        COVER(ACT_StartLinger);
        printf("ACTION StartLinger(d%d)\n", d)
    }
}

/* TLA+: StopSandbox(d) */
inline StopSandbox(d) {
    d_step {
        domainPhase[d] == D_Stopping &&
        sandboxState[d] == X_Ready
        ->
        sandboxState[d] = X_Stopped;
        COVER(ACT_StopSandbox);
        printf("ACTION StopSandbox(d%d)\n", d)
    }
}

/* TLA+: StopSidecar(d) */
inline StopSidecar(d) {
    d_step {
        domainPhase[d] == D_Stopping &&
#ifndef BUG_TEARDOWN_ORDER
        sandboxState[d] == X_Stopped &&
#endif
        sidecarState[d] == X_Ready
        ->
        sidecarState[d] = X_Stopped;
        COVER(ACT_StopSidecar);
        printf("ACTION StopSidecar(d%d)\n", d)
    }
}

/* TLA+: UnmountStateAnchor(d) */
inline UnmountStateAnchor(d) {
    d_step {
        domainPhase[d] == D_Stopping &&
#ifndef BUG_ANCHOR_ORDER
        sandboxState[d] == X_Stopped &&
        sidecarState[d] == X_Stopped &&
#endif
        stateAnchorState[d] == M_Mounted
        ->
        stateAnchorState[d] = M_Unmounted;
        COVER(ACT_UnmountStateAnchor);
        printf("ACTION UnmountStateAnchor(d%d)\n", d)
    }
}

/* TLA+: FinishTeardown(d) */
inline FinishTeardown(d) {
    d_step {
        domainPhase[d] == D_Stopping &&
        stateAnchorState[d] == M_Unmounted &&
        sidecarState[d] == X_Stopped &&
        sandboxState[d] == X_Stopped
        ->
        domainPhase[d] = D_Absent;
        coordinatorState[d] = C_Absent;
        trustReady[d] = false;
        lockOwner[d] = NoSession;
        COVER(ACT_FinishTeardown);
        printf("ACTION FinishTeardown(d%d)\n", d)
    }
}

/* ---------------------------------------------------------------------
 * Host escalation protocol
 * ------------------------------------------------------------------- */

/* TLA+: ReceiveEscalation(r)   (no fairness in Spec) */
inline ReceiveEscalation(r) {
    d_step {
        requestPhase[r] == Q_Unused &&
        sessionPhase[ReqSession(r)] == S_Attached &&
        activeRequest[ReqSession(r)] == NoRequest &&
        registered[ReqDomain(r)].has[ReqSession(r)] &&
        connected[ReqDomain(r)].has[ReqSession(r)] &&
#ifndef BUG_UNAUTHENTICATED
        CertificateValid(r) &&
        SignatureValid(r) &&
#endif
        true
        ->
        requestPhase[r] = Q_Verified;
        activeRequest[ReqSession(r)] = r;
        COVER(ACT_ReceiveEscalation);
        printf("ACTION ReceiveEscalation(r%d)\n", r)
    }
}

/* TLA+: AutoApprove(r) */
inline AutoApprove(r) {
    d_step {
        requestPhase[r] == Q_Verified &&
        AutoRuleMatches(r) &&
#ifndef BUG_AUTO_SHELL
        !CommandRequiresShell(RequestCommand(r)) &&
#endif
        true
        ->
        requestPhase[r] = Q_Approved;
        approvalSource[r] = A_AutoRule;
        approvedCommand[r] = RequestCommand(r);
        COVER(ACT_AutoApprove);
        printf("ACTION AutoApprove(r%d)\n", r)
    }
}

/* Extension: SessionApprove(r). The request's exact identity was approved
 * with [s] earlier in the same Client Session: approved without a prompt. */
inline SessionApprove(r) {
    d_step {
        requestPhase[r] == Q_Verified &&
        Granted(r)
        ->
        requestPhase[r] = Q_Approved;
        approvalSource[r] = A_SessionGrant;
        approvedCommand[r] = RequestCommand(r);
        COVER(ACT_SessionApprove);
        printf("ACTION SessionApprove(r%d)\n", r)
    }
}

/* TLA+: QueuePrompt(r)   (extension: not when an [s] approval covers r) */
inline QueuePrompt(r) {
    d_step {
        requestPhase[r] == Q_Verified &&
        !(AutoRuleMatches(r) && !CommandRequiresShell(RequestCommand(r))) &&
        !Granted(r)
        ->
        requestPhase[r] = Q_AwaitingApproval;
        COVER(ACT_QueuePrompt);
        printf("ACTION QueuePrompt(r%d)\n", r)
    }
}

/* TLA+: BeginPrompt(r). The terminal is switched to the prompt, which starts
 * to be drawn; no key is accepted yet (extension: PromptDrawn). */
inline BeginPrompt(r) {
    d_step {
        requestPhase[r] == Q_AwaitingApproval &&
        sessionPhase[ReqSession(r)] == S_Attached &&
        activeRequest[ReqSession(r)] == r
        ->
        sessionPhase[ReqSession(r)] = S_Prompting;
        terminalRoute[ReqSession(r)] = T_Prompt;
        ClosePrompt(ReqSession(r));     /* not drawn, shows the request's argv */
        COVER(ACT_BeginPrompt);
        printf("ACTION BeginPrompt(r%d)\n", r)
    }
}

/* The prompt of request r is on the terminal of its session (any stage). */
#define PromptOn(r) \
    (requestPhase[r] == Q_AwaitingApproval && \
     sessionPhase[ReqSession(r)] == S_Prompting && \
     activeRequest[ReqSession(r)] == r)
/* ... and accepts keys: fully drawn and settled. */
#define PromptAccepts(r)    (PromptOn(r) && promptDrawn[ReqSession(r)])
#if defined(BUG_TYPEAHEAD)
#define ApprovalKeyAccepted(r)  PromptOn(r)     /* broken: typed-ahead key counts */
#else
#define ApprovalKeyAccepted(r)  PromptAccepts(r)
#endif

/* Extension: PromptDrawn(r). The prompt (request's or edited argv) is fully
 * drawn and the settle delay has passed; input that arrived before was
 * discarded, from now on keys are decisions. */
inline PromptDrawn(r) {
    d_step {
        PromptOn(r) &&
        !promptDrawn[ReqSession(r)]
        ->
        promptDrawn[ReqSession(r)] = true;
        COVER(ACT_PromptDrawn);
        printf("ACTION PromptDrawn(r%d)\n", r)
    }
}

/* Extension: DiscardTypeahead(r). A key arrives while the prompt is still
 * being drawn or settling: it is thrown away, nothing changes. */
inline DiscardTypeahead(r) {
    d_step {
        PromptOn(r) &&
        !promptDrawn[ReqSession(r)]
        ->
        COVER(ACT_DiscardTypeahead);
        printf("ACTION DiscardTypeahead(r%d)\n", r)
    }
}

/* TLA+: DeveloperApprove(r, cmd), refined: [a] approves exactly the argv the
 * drawn prompt shows (cmd is the request's argv or the edited one), and
 * only once the prompt accepts keys. */
inline DeveloperApprove(r) {
    d_step {
        ApprovalKeyAccepted(r)
        ->
        requestPhase[r] = Q_Approved;
        approvalSource[r] = A_Developer;
        approvedCommand[r] = Shown(ReqSession(r), r);
        confirmedCommand[r] = Shown(ReqSession(r), r);
        approvalDrawn[r] = promptDrawn[ReqSession(r)];
        ClosePrompt(ReqSession(r));
        COVER(ACT_DeveloperApprove);
        printf("ACTION DeveloperApprove(r%d)\n", r)
    }
}

/* Extension: DeveloperApproveSession(r). [s]: as [a], and the request's
 * exact identity is approved for the rest of this Client Session. Offered
 * for the request's own argv only, not for an edited one (a later request
 * with this identity runs its own argv). */
inline DeveloperApproveSession(r) {
    d_step {
        ApprovalKeyAccepted(r) &&
        !promptEdited[ReqSession(r)]
        ->
        requestPhase[r] = Q_Approved;
        approvalSource[r] = A_Developer;
        approvedCommand[r] = RequestCommand(r);
        confirmedCommand[r] = RequestCommand(r);
        approvalDrawn[r] = promptDrawn[ReqSession(r)];
        sessionGrant[ReqSession(r)] = sessionGrant[ReqSession(r)] | GrantBit(RequestCommand(r));
        ClosePrompt(ReqSession(r));
        COVER(ACT_DeveloperApproveSession);
        printf("ACTION DeveloperApproveSession(r%d)\n", r)
    }
}

/* Extension: DeveloperEdit(r). [e]: the developer edits the argv; the
 * prompt is drawn again with the edited argv and needs a new [a]. One edit
 * per prompt: the prompt's deadline is absolute, so a prompt sees finitely
 * many edits, and a second edit would only lead to the same "edited" value
 * of the abstraction. */
inline DeveloperEdit(r) {
    d_step {
        PromptAccepts(r) &&
        !promptEdited[ReqSession(r)]
        ->
#if defined(BUG_EDIT_NO_CONFIRM)
        /* broken: the edited argv is approved as it leaves the editor; the
         * key that approved it, [e], was pressed on the drawn prompt
         * showing the request's own argv */
        requestPhase[r] = Q_Approved;
        approvalSource[r] = A_Developer;
        approvedCommand[r] = EditedCmd;
        confirmedCommand[r] = Shown(ReqSession(r), r);
        approvalDrawn[r] = true;
        ClosePrompt(ReqSession(r));
#else
        promptEdited[ReqSession(r)] = true;
        promptDrawn[ReqSession(r)] = false;     /* redrawn, settles again */
#endif
        COVER(ACT_DeveloperEdit);
        printf("ACTION DeveloperEdit(r%d)\n", r)
    }
}

/* TLA+: DeveloperDeny(r)   (extension: keys only on a drawn prompt) */
inline DeveloperDeny(r) {
    d_step {
        PromptAccepts(r)
        ->
        requestPhase[r] = Q_Denied;
        sessionPhase[ReqSession(r)] = S_Attached;
        terminalRoute[ReqSession(r)] = T_Sandbox;
        activeRequest[ReqSession(r)] = NoRequest;
        ClosePrompt(ReqSession(r));
        COVER(ACT_DeveloperDeny);
        printf("ACTION DeveloperDeny(r%d)\n", r)
    }
}

/* Extension: DeveloperQuit(r). [q]: the request is denied and the Client
 * Session ends cleanly (as DisconnectSession, but the request is Denied,
 * not Cancelled). The Domain stops through the linger if no session is left. */
inline DeveloperQuit(r) {
    d_step {
        PromptAccepts(r)
        ->
        requestPhase[r] = Q_Denied;
        registered[ReqDomain(r)].has[ReqSession(r)] = false;
        connected[ReqDomain(r)].has[ReqSession(r)] = false;
        sessionPhase[ReqSession(r)] = S_Closed;
        terminalRoute[ReqSession(r)] = T_Detached;
        connectionState[ReqSession(r)] = K_Disconnected;
        activeRequest[ReqSession(r)] = NoRequest;
        sessionGrant[ReqSession(r)] = 0;
        ClosePrompt(ReqSession(r));
        COVER(ACT_DeveloperQuit);
        printf("ACTION DeveloperQuit(r%d)\n", r)
    }
}

/* Extension: PromptTimeout(r). The prompt's deadline passes (in any stage:
 * drawing, settled, after an edit): the request is answered as denied
 * (phase TimedOut). This is the part of TLA+ TimeoutRequest(r) for a
 * request whose prompt is on the terminal. */
inline PromptTimeout(r) {
    d_step {
        PromptOn(r)
        ->
        requestPhase[r] = Q_TimedOut;
        sessionPhase[ReqSession(r)] = S_Attached;
        terminalRoute[ReqSession(r)] = T_Sandbox;
        activeRequest[ReqSession(r)] = NoRequest;
#ifndef BUG_PROMPT_LEAK
        ClosePrompt(ReqSession(r));
#endif
        COVER(ACT_PromptTimeout);
        printf("ACTION PromptTimeout(r%d)\n", r)
    }
}

/* TLA+: StartHostExecution(r)   (extension: records the argv it runs) */
inline StartHostExecution(r) {
    d_step {
        requestPhase[r] == Q_Approved &&
        activeRequest[ReqSession(r)] == r &&
        connected[ReqDomain(r)].has[ReqSession(r)] &&
        (sessionPhase[ReqSession(r)] == S_Attached ||
         sessionPhase[ReqSession(r)] == S_Prompting)
        ->
        requestPhase[r] = Q_Executing;
        sessionPhase[ReqSession(r)] = S_HostExecuting;
        terminalRoute[ReqSession(r)] = T_HostProcess;
        hostRunning[r] = true;
#if defined(BUG_EXEC_ORIGINAL)
        execCommand[r] = RequestCommand(r);     /* broken: ignores the edit */
#else
        execCommand[r] = approvedCommand[r];
#endif
        COVER(ACT_StartHostExecution);
        printf("ACTION StartHostExecution(r%d)\n", r)
    }
}

/* Extension: StartHostExecutionPiped(r). As StartHostExecution, for a
 * client that is not on a terminal (its output is piped, or it streams
 * --stdin): the host process gets pipes, and the terminal stays with the
 * sandbox. */
inline StartHostExecutionPiped(r) {
    d_step {
        requestPhase[r] == Q_Approved &&
        activeRequest[ReqSession(r)] == r &&
        connected[ReqDomain(r)].has[ReqSession(r)] &&
        (sessionPhase[ReqSession(r)] == S_Attached ||
         sessionPhase[ReqSession(r)] == S_Prompting)
        ->
        requestPhase[r] = Q_Executing;
        sessionPhase[ReqSession(r)] = S_HostExecuting;
        terminalRoute[ReqSession(r)] = T_Sandbox;
        hostRunning[r] = true;
        execCommand[r] = approvedCommand[r];
        COVER(ACT_StartHostExecutionPiped);
        printf("ACTION StartHostExecutionPiped(r%d)\n", r)
    }
}

/* Extension: FailHostExecution(r)   (no fairness). An approved request
 * cannot start: its executable is no longer the one approved, or the exec
 * fails. Nothing ran; the terminal goes back to the sandbox. */
inline FailHostExecution(r) {
    d_step {
        requestPhase[r] == Q_Approved &&
        activeRequest[ReqSession(r)] == r
        ->
        requestPhase[r] = Q_Failed;
        sessionPhase[ReqSession(r)] = S_Attached;
        terminalRoute[ReqSession(r)] = T_Sandbox;
        activeRequest[ReqSession(r)] = NoRequest;
        ClosePrompt(ReqSession(r));
        COVER(ACT_FailHostExecution);
        printf("ACTION FailHostExecution(r%d)\n", r)
    }
}

/* Extension: TimeoutHostExecution(r)   (no fairness). A running host
 * process outlives its time limit: it is ended (the request TimedOut). */
inline TimeoutHostExecution(r) {
    d_step {
        requestPhase[r] == Q_Executing &&
        hostRunning[r]
        ->
        requestPhase[r] = Q_TimedOut;
        hostRunning[r] = false;
        execCommand[r] = NoCommand;
        sessionPhase[ReqSession(r)] = S_Attached;
        terminalRoute[ReqSession(r)] = T_Sandbox;
        activeRequest[ReqSession(r)] = NoRequest;
        COVER(ACT_TimeoutHostExecution);
        printf("ACTION TimeoutHostExecution(r%d)\n", r)
    }
}

/* Extension: DenyWithoutPrompt(r)   (no fairness). A request no rule
 * approves that cannot be put on a prompt (its session has no terminal,
 * or its argv[0] is not an executable that could be shown) is denied
 * without asking. */
inline DenyWithoutPrompt(r) {
    d_step {
        requestPhase[r] == Q_AwaitingApproval &&
        activeRequest[ReqSession(r)] == r &&
        sessionPhase[ReqSession(r)] == S_Attached
        ->
        requestPhase[r] = Q_Denied;
        activeRequest[ReqSession(r)] = NoRequest;
        COVER(ACT_DenyWithoutPrompt);
        printf("ACTION DenyWithoutPrompt(r%d)\n", r)
    }
}

/* TLA+: CompleteHostExecution(r) */
inline CompleteHostExecution(r) {
    d_step {
        requestPhase[r] == Q_Executing &&
        hostRunning[r]
        ->
        requestPhase[r] = Q_Completed;
        hostRunning[r] = false;
        execCommand[r] = NoCommand;
        sessionPhase[ReqSession(r)] = S_Attached;
        terminalRoute[ReqSession(r)] = T_Sandbox;
        activeRequest[ReqSession(r)] = NoRequest;
        COVER(ACT_CompleteHostExecution);
        printf("ACTION CompleteHostExecution(r%d)\n", r)
    }
}

/* TLA+: TimeoutRequest(r), without the case PromptTimeout(r) takes (the
 * union of the two is the TLA+ action). */
inline TimeoutRequest(r) {
    d_step {
        (requestPhase[r] == Q_Verified ||
         requestPhase[r] == Q_AwaitingApproval ||
         requestPhase[r] == Q_Approved) &&
        activeRequest[ReqSession(r)] == r &&
        !PromptOn(r)
        ->
        requestPhase[r] = Q_TimedOut;
        sessionPhase[ReqSession(r)] = S_Attached;
        terminalRoute[ReqSession(r)] = T_Sandbox;
        activeRequest[ReqSession(r)] = NoRequest;
        ClosePrompt(ReqSession(r));
        COVER(ACT_TimeoutRequest);
        printf("ACTION TimeoutRequest(r%d)\n", r)
    }
}

/* Extension: CancelRequest(r)   (no fairness). The Escalation Client
 * cancels (Ctrl-C in the sandbox) a request that is not finished: a prompt
 * closes, a host process is ended, the terminal returns to the sandbox. */
inline CancelRequest(r) {
    d_step {
        (requestPhase[r] == Q_Verified ||
         requestPhase[r] == Q_AwaitingApproval ||
         requestPhase[r] == Q_Approved ||
         requestPhase[r] == Q_Executing) &&
        activeRequest[ReqSession(r)] == r
        ->
        requestPhase[r] = Q_Cancelled;
#ifndef BUG_CANCEL_ORPHAN
        hostRunning[r] = false;
        execCommand[r] = NoCommand;
#endif
        sessionPhase[ReqSession(r)] = S_Attached;
        terminalRoute[ReqSession(r)] = T_Sandbox;
        activeRequest[ReqSession(r)] = NoRequest;
        ClosePrompt(ReqSession(r));
        COVER(ACT_CancelRequest);
        printf("ACTION CancelRequest(r%d)\n", r)
    }
}

/* ---------------------------------------------------------------------
 * Failure and recovery
 * ------------------------------------------------------------------- */

/* TLA+: FailDomain(d)   (no fairness in Spec) */
inline FailDomain(d) {
    d_step {
        (domainPhase[d] == D_Starting || domainPhase[d] == D_Ready ||
         domainPhase[d] == D_Stopping)
        ->
        domainPhase[d] = D_Failed;
        coordinatorState[d] = C_Failed;
        stateAnchorState[d] = M_Unmounted;
        sidecarState[d] = X_Stopped;
        sandboxState[d] = X_Stopped;
        trustReady[d] = false;
        lockOwner[d] = NoSession;
        published[d] = false;
        lingering[d] = false;       /* extension */
        sidecarLaunched[d] = false; /* extension: a failure of either side */
        sandboxBooting[d] = false;  /* during the overlap stops both */
        routeOut[d] = false;
        for (ii : 0 .. NS - 1) {
            registered[d].has[ii] = false;
            connected[d].has[ii] = false;
            if
            :: Dom(ii) == d ->
                if
                :: sessionPhase[ii] != S_New && sessionPhase[ii] != S_Closed ->
                    sessionPhase[ii] = S_Failed
                :: else -> skip
                fi;
                terminalRoute[ii] = T_Detached;
                connectionState[ii] = K_Disconnected;
                activeRequest[ii] = NoRequest;
                ClosePrompt(ii);            /* extension */
                sessionGrant[ii] = 0        /* extension */
            :: else -> skip
            fi
        };
        for (ii : 0 .. NR - 1) {
            if
            :: ReqDomain(ii) == d ->
                if
                :: requestPhase[ii] != Q_Unused && !IsTerminalRequest(ii) ->
                    requestPhase[ii] = Q_Failed
                :: else -> skip
                fi;
                hostRunning[ii] = false;    /* hostRunning \ RequestsForDomain(d) */
                execCommand[ii] = NoCommand /* extension */
            :: else -> skip
            fi
        };
        ii = 0;
        COVER(ACT_FailDomain);
        printf("ACTION FailDomain(d%d)\n", d)
    }
}

/* TLA+: ResetFailedDomain(d) */
inline ResetFailedDomain(d) {
    d_step {
        domainPhase[d] == D_Failed
        ->
        domainPhase[d] = D_Absent;
        coordinatorState[d] = C_Absent;
        COVER(ACT_ResetFailedDomain);
        printf("ACTION ResetFailedDomain(d%d)\n", d)
    }
}

/* ---------------------------------------------------------------------
 * Processes = the fairness partition of Spec
 * ------------------------------------------------------------------- */

/* WF_vars(DomainProgress(d))   (+ extension: StartLinger) */
proctype DomainProc(byte d) {
end_DomainProgress:
    do
    :: MountStateAnchor(d)
    :: CreateTrustAnchor(d)
    :: LaunchSidecar(d)
    :: StartSidecar(d)
    :: BootSandbox(d)
    :: StartSandbox(d)
    :: PublishDomain(d)
    :: StartLinger(d)
    :: BeginTeardown(d)
    :: StopSandbox(d)
    :: StopSidecar(d)
    :: UnmountStateAnchor(d)
    :: FinishTeardown(d)
    :: ResetFailedDomain(d)
    od
}

/* WF_vars(SessionProgress(s)) */
proctype SessionProc(byte s) {
end_SessionProgress:
    do
    :: StartNewDomain(s)
    :: StartReadySession(s)
    :: WaitForDomain(s)
    :: RestartWaitingDomain(s)
    :: AdvanceWaitingSession(s)
    :: RejectConfigurationMismatch(s)
    :: RegisterSession(s)
    od
}

/* WF_vars(RequestProgress(r)), without the developer's keys (see
 * Environment), + extension: SessionApprove, PromptDrawn, PromptTimeout. */
proctype RequestProc(byte r) {
end_RequestProgress:
    do
    :: AutoApprove(r)
    :: SessionApprove(r)
    :: QueuePrompt(r)
    :: BeginPrompt(r)
    :: PromptDrawn(r)
    :: StartHostExecution(r)
    :: StartHostExecutionPiped(r)
    :: CompleteHostExecution(r)
    :: TimeoutRequest(r)
#if !defined(BUG_NO_PROMPT_TIMEOUT)
    :: PromptTimeout(r)
#endif
    od
}

/* Per request: the Escalation Client's cancellation and the developer's
 * keys on the prompt. None is fair: the developer may never answer, and
 * every prompt still has to end (PromptEventuallyEnds rests on the time-out).
 * TLA+ has DeveloperApprove/Deny inside RequestProgress (fair); leaving them
 * unfair assumes less. */
#define REQUEST_ENV(r) \
    :: ReceiveEscalation(r) \
    :: CancelRequest(r) \
    :: DiscardTypeahead(r) \
    :: DeveloperApprove(r) \
    :: DeveloperApproveSession(r) \
    :: DeveloperEdit(r) \
    :: DeveloperDeny(r) \
    :: DeveloperQuit(r) \
    :: FailHostExecution(r) \
    :: TimeoutHostExecution(r) \
    :: DenyWithoutPrompt(r)

/* The rest of Next: \E s : DisconnectSession(s), \E d : FailDomain(d),
 * \E r : ReceiveEscalation(r), + the unfair extension actions above. Not
 * fair in Spec; the stutter option keeps pan's process fairness from
 * forcing any of them. */
proctype Environment() {
end_Environment:
    do
    :: DisconnectSession(S1)
    :: DisconnectSession(S2)
    :: FailDomain(D1)
    REQUEST_ENV(R1)
    REQUEST_ENV(R2)
    REQUEST_ENV(R3)
#if defined(FIXTURE_WIDE)
    REQUEST_ENV(R4)
#endif
#if defined(FIXTURE_WIDE)
    :: DisconnectSession(S3)
    :: FailDomain(D2)
#endif
#ifndef NO_STUTTER
    :: stutter = 0  /* stuttering step: changes no stored variable */
#endif
    od
}

init {
    atomic {
        run DomainProc(D1);
        run SessionProc(S1);
        run SessionProc(S2);
        run RequestProc(R1);
        run RequestProc(R2);
        run RequestProc(R3);
#if defined(FIXTURE_WIDE)
        run RequestProc(R4);
#endif
#if defined(FIXTURE_WIDE)
        run DomainProc(D2);
        run SessionProc(S3);
#endif
        run Environment()
    }
}

/* ---------------------------------------------------------------------
 * Safety properties (Lazaret.cfg INVARIANTS)
 * ------------------------------------------------------------------- */

#define IsDomainPhase(x) ((x) == D_Absent || (x) == D_Starting || \
    (x) == D_Ready || (x) == D_Stopping || (x) == D_Failed)
#define IsCoordinatorState(x) ((x) == C_Absent || (x) == C_Starting || \
    (x) == C_Ready || (x) == C_Stopping || (x) == C_Failed)
#define IsMountState(x) ((x) == M_Unmounted || (x) == M_Mounted)
#define IsResourceState(x) ((x) == X_Stopped || (x) == X_Ready || (x) == X_Failed)
#define IsSessionPhase(x) ((x) == S_New || (x) == S_Waiting || \
    (x) == S_Registering || (x) == S_Attached || (x) == S_Prompting || \
    (x) == S_HostExecuting || (x) == S_Closed || (x) == S_Failed)
#define IsTerminalRoute(x) ((x) == T_Detached || (x) == T_Sandbox || \
    (x) == T_Prompt || (x) == T_HostProcess)
#define IsConnectionState(x) ((x) == K_Disconnected || (x) == K_Connected)
#define IsRequestPhase(x) ((x) == Q_Unused || (x) == Q_Verified || \
    (x) == Q_AwaitingApproval || (x) == Q_Approved || (x) == Q_Executing || \
    TerminalRequestPhase(x))
#define IsApprovalSource(x) ((x) == A_NoApproval || (x) == A_AutoRule || \
    (x) == A_Developer || (x) == A_SessionGrant)

/* TypeOK (the BOOLEAN and SUBSET members are bool arrays: typed by construction) */
#define TypeOK_d(d, _) (IsDomainPhase(domainPhase[d]) && \
    IsCoordinatorState(coordinatorState[d]) && \
    IsMountState(stateAnchorState[d]) && IsResourceState(sidecarState[d]) && \
    IsResourceState(sandboxState[d]) && lockOwner[d] <= NoSession)
#define TypeOK_s(s, _) (IsSessionPhase(sessionPhase[s]) && \
    IsTerminalRoute(terminalRoute[s]) && \
    IsConnectionState(connectionState[s]) && activeRequest[s] <= NoRequest && \
    sessionGrant[s] < GrantBit(NC))
#define TypeOK_r(r, _) (IsRequestPhase(requestPhase[r]) && \
    IsApprovalSource(approvalSource[r]) && approvedCommand[r] <= NoCommand && \
    execCommand[r] <= NoCommand && confirmedCommand[r] <= NoCommand)
#define TypeOK (ALL_D(TypeOK_d, 0) && ALL_S(TypeOK_s, 0) && ALL_R(TypeOK_r, 0))

/* ConfigurationConfinement */
#define CC_d(d, _) (domainPhase[d] == D_Absent || ConfigSafe(d))
#define ConfigurationConfinement ALL_D(CC_d, 0)

/* OrderedNetworkStartup */
#define ONS_d(d, _) (sandboxState[d] != X_Ready || sidecarState[d] == X_Ready)
#define OrderedNetworkStartup ALL_D(ONS_d, 0)

/* PublishedDomainsReady */
#define PDR_d(d, _) (!published[d] || \
    (domainPhase[d] == D_Ready && coordinatorState[d] == C_Ready && \
     stateAnchorState[d] == M_Mounted && sidecarState[d] == X_Ready && \
     sandboxState[d] == X_Ready && trustReady[d]))
#define PublishedDomainsReady ALL_D(PDR_d, 0)

/* RegisteredSessionsConnected */
#define RSC_ds(s, d) (!registered[d].has[s] || connected[d].has[s])
#define RSC_d(d, _) ALL_S(RSC_ds, d)
#define RegisteredSessionsConnected ALL_D(RSC_d, 0)

/* AttachedSessionsValid */
#define ASV_s(s, _) (!(sessionPhase[s] == S_Attached || \
      sessionPhase[s] == S_Prompting || sessionPhase[s] == S_HostExecuting) || \
    (registered[Dom(s)].has[s] && connected[Dom(s)].has[s] && \
     domainPhase[Dom(s)] == D_Ready && \
     SessionFingerprint(s) == DomainFingerprint(Dom(s))))
#define AttachedSessionsValid ALL_S(ASV_s, 0)

/* AuthenticatedRequestsOnly */
#define ARO_r(r, _) (requestPhase[r] == Q_Unused || \
    (CertificateValid(r) && SignatureValid(r)))
#define AuthenticatedRequestsOnly ALL_R(ARO_r, 0)

/* HostExecutionAuthorized   (extension: an [s] approval is a source too) */
#define HEA_r(r, _) (!hostRunning[r] || \
    (requestPhase[r] == Q_Executing && \
     (approvalSource[r] == A_AutoRule || approvalSource[r] == A_Developer || \
      approvalSource[r] == A_SessionGrant) && \
     approvedCommand[r] < NC))
#define HostExecutionAuthorized ALL_R(HEA_r, 0)

/* AutoApprovalNoShell */
#define AANS_r(r, _) (approvalSource[r] != A_AutoRule || \
    (approvedCommand[r] == RequestCommand(r) && \
     !CommandRequiresShell(approvedCommand[r])))
#define AutoApprovalNoShell ALL_R(AANS_r, 0)

/* TerminalIsolation */
#define TI_s(s, _) (sessionPhase[s] != S_Prompting || terminalRoute[s] == T_Prompt)
#define TerminalIsolation ALL_S(TI_s, 0)

/* NoOrphanHostProcess */
#define NOHP_r(r, _) (!hostRunning[r] || \
    (activeRequest[ReqSession(r)] == r && \
     sessionPhase[ReqSession(r)] == S_HostExecuting && \
     connectionState[ReqSession(r)] == K_Connected))
#define NoOrphanHostProcess ALL_R(NOHP_r, 0)

/* StateAnchorOwnership */
#define SAO_d(d, _) (stateAnchorState[d] != M_Mounted || \
    coordinatorState[d] == C_Starting || coordinatorState[d] == C_Ready || \
    coordinatorState[d] == C_Stopping)
#define StateAnchorOwnership ALL_D(SAO_d, 0)

/* Not in the TLA+ model (extra, ours): the start/teardown order as a state
 * property. OrderedNetworkStartup says the sandbox runs only inside a
 * running sidecar; no TLA+ invariant says that the sidecar runs only on a
 * mounted State Anchor and a Trust Anchor, i.e. that the anchor is mounted
 * before and unmounted after the network and the sandbox. */
#define RN_d(d, _) ((sandboxState[d] != X_Ready || sidecarState[d] == X_Ready) && \
    (sidecarState[d] != X_Ready || (stateAnchorState[d] == M_Mounted && trustReady[d])) && \
    (!sidecarLaunched[d] || (stateAnchorState[d] == M_Mounted && trustReady[d] && \
                             sidecarState[d] == X_Stopped)) && \
    (!sandboxBooting[d] || (stateAnchorState[d] == M_Mounted && trustReady[d] && \
                            sandboxState[d] == X_Stopped && \
                            (sidecarLaunched[d] || sidecarState[d] == X_Ready))))
#define ResourceNesting ALL_D(RN_d, 0)

/* Extension, start overlap (ours): EgressOnlyThroughPolicy. While any
 * process of the sandbox exists (booting or ready), every route out of the
 * enforcement namespace is the policy's: before the policy is in place
 * there is none, so nothing the sandbox sends leaves it. */
#define EOTP_d(d, _) (!(sandboxBooting[d] || sandboxState[d] == X_Ready) || !routeOut[d])
#define EgressOnlyThroughPolicy ALL_D(EOTP_d, 0)

/* Extension, escalation (ours). */

/* ExecutedEqualsApproved: HostExecutionAuthorized, strengthened. The host
 * process runs exactly the approved argv; an auto or [s]-matched approval
 * is for the request's own argv; a developer approval is for exactly the
 * argv the prompt showed when [a]/[s] was pressed (after [e], the edited
 * argv, shown again and confirmed). */
#define EEA_r(r, _) (!hostRunning[r] || \
    (execCommand[r] == approvedCommand[r] && \
     (approvalSource[r] != A_Developer || approvedCommand[r] == confirmedCommand[r]) && \
     (approvalSource[r] == A_Developer || approvedCommand[r] == RequestCommand(r))))
#define ExecutedEqualsApproved ALL_R(EEA_r, 0)

/* ApprovalOnlyAfterDraw: a developer approval was given on a prompt that
 * was fully drawn and settled (keys typed ahead were discarded). */
#define AOAD_r(r, _) (approvalSource[r] != A_Developer || approvalDrawn[r])
#define ApprovalOnlyAfterDraw ALL_R(AOAD_r, 0)

/* SessionApprovalScoped: a request approved by an [s] approval, until it
 * ends, is covered by a grant of its own session for its own exact
 * identity; a session that is not live (not Attached, Prompting or
 * HostExecuting: closed, failed) holds no grant. */
#define SessionLive(s) (sessionPhase[s] == S_Attached || \
    sessionPhase[s] == S_Prompting || sessionPhase[s] == S_HostExecuting)
#define SAS_r(r, _) (approvalSource[r] != A_SessionGrant || \
    !(requestPhase[r] == Q_Approved || requestPhase[r] == Q_Executing) || \
    (GrantHas(ReqSession(r), RequestCommand(r)) && \
     approvedCommand[r] == RequestCommand(r)))
#define SAS_s(s, _) (SessionLive(s) || sessionGrant[s] == 0)
#define SessionApprovalScoped (ALL_R(SAS_r, 0) && ALL_S(SAS_s, 0))

/* LingerOnlyWhenIdle: a Domain lingers only while Ready and idle (no
 * session interested, registered or connected); a join ends the linger. */
#define LOWI_d(d, _) (!lingering[d] || (domainPhase[d] == D_Ready && IdleDomain(d)))
#define LingerOnlyWhenIdle ALL_D(LOWI_d, 0)

/* PromptStateClosed (model hygiene, not a protocol property): the prompt
 * details of a session are set only while its prompt is on the terminal. */
#define PSC_s(s, _) ((!promptDrawn[s] && !promptEdited[s]) || \
    (sessionPhase[s] == S_Prompting && activeRequest[s] != NoRequest && \
     requestPhase[activeRequest[s]] == Q_AwaitingApproval))
#define PromptStateClosed ALL_S(PSC_s, 0)

/* Not in the TLA+ model (extra, ours): a state without any successor is a
 * fully closed or failed application state, as the comment in Lazaret.cfg
 * claims. Only evaluated when the Environment cannot stutter (NO_STUTTER). */
#define QC_d(d, _) (domainPhase[d] == D_Absent && coordinatorState[d] == C_Absent && \
    stateAnchorState[d] == M_Unmounted && sidecarState[d] == X_Stopped && \
    sandboxState[d] == X_Stopped && !trustReady[d] && \
    lockOwner[d] == NoSession && !published[d] && !lingering[d] && \
    !sidecarLaunched[d] && !sandboxBooting[d] && !routeOut[d] && \
    ALL_S(NotRegistered, d) && ALL_S(NotConnected, d))
#define QC_s(s, _) ((sessionPhase[s] == S_Closed || sessionPhase[s] == S_Failed) && \
    terminalRoute[s] == T_Detached && connectionState[s] == K_Disconnected && \
    activeRequest[s] == NoRequest && sessionGrant[s] == 0 && \
    !promptDrawn[s] && !promptEdited[s])
#define QC_r(r, _) ((requestPhase[r] == Q_Unused || IsTerminalRequest(r)) && \
    !hostRunning[r] && execCommand[r] == NoCommand)
#define QuiescentStateClean (ALL_D(QC_d, 0) && ALL_S(QC_s, 0) && ALL_R(QC_r, 0))

/* All invariants, checked in every reachable state: the monitor's guard is
 * evaluated in every state and is enabled only when one is violated; then it
 * names every invariant violated in that state (the trail, replayed with
 * spin -t, shows them) and asserts. */
#define TlaInvariants (TypeOK && \
    ConfigurationConfinement && \
    OrderedNetworkStartup && \
    PublishedDomainsReady && \
    RegisteredSessionsConnected && \
    AttachedSessionsValid && \
    AuthenticatedRequestsOnly && \
    HostExecutionAuthorized && \
    AutoApprovalNoShell && \
    TerminalIsolation && \
    NoOrphanHostProcess && \
    StateAnchorOwnership)
#ifdef TLA_INVARIANTS_ONLY
#define AllInvariants TlaInvariants
#else
/* + extras, ours */
#define AllInvariants (TlaInvariants && ResourceNesting && \
    ExecutedEqualsApproved && \
    ApprovalOnlyAfterDraw && \
    SessionApprovalScoped && \
    LingerOnlyWhenIdle && \
    PromptStateClosed && \
    EgressOnlyThroughPolicy)
#endif

active proctype Invariants() {
end_Invariants:
    do
    :: atomic {
        !(AllInvariants) ->
        if :: !(TypeOK) -> printf("VIOLATED TypeOK\n") :: else -> skip fi;
        if :: !(ConfigurationConfinement) -> printf("VIOLATED ConfigurationConfinement\n") :: else -> skip fi;
        if :: !(OrderedNetworkStartup) -> printf("VIOLATED OrderedNetworkStartup\n") :: else -> skip fi;
        if :: !(PublishedDomainsReady) -> printf("VIOLATED PublishedDomainsReady\n") :: else -> skip fi;
        if :: !(RegisteredSessionsConnected) -> printf("VIOLATED RegisteredSessionsConnected\n") :: else -> skip fi;
        if :: !(AttachedSessionsValid) -> printf("VIOLATED AttachedSessionsValid\n") :: else -> skip fi;
        if :: !(AuthenticatedRequestsOnly) -> printf("VIOLATED AuthenticatedRequestsOnly\n") :: else -> skip fi;
        if :: !(HostExecutionAuthorized) -> printf("VIOLATED HostExecutionAuthorized\n") :: else -> skip fi;
        if :: !(AutoApprovalNoShell) -> printf("VIOLATED AutoApprovalNoShell\n") :: else -> skip fi;
        if :: !(TerminalIsolation) -> printf("VIOLATED TerminalIsolation\n") :: else -> skip fi;
        if :: !(NoOrphanHostProcess) -> printf("VIOLATED NoOrphanHostProcess\n") :: else -> skip fi;
        if :: !(StateAnchorOwnership) -> printf("VIOLATED StateAnchorOwnership\n") :: else -> skip fi;
#ifndef TLA_INVARIANTS_ONLY
        if :: !(ResourceNesting) -> printf("VIOLATED ResourceNesting\n") :: else -> skip fi;
        if :: !(ExecutedEqualsApproved) -> printf("VIOLATED ExecutedEqualsApproved\n") :: else -> skip fi;
        if :: !(ApprovalOnlyAfterDraw) -> printf("VIOLATED ApprovalOnlyAfterDraw\n") :: else -> skip fi;
        if :: !(SessionApprovalScoped) -> printf("VIOLATED SessionApprovalScoped\n") :: else -> skip fi;
        if :: !(LingerOnlyWhenIdle) -> printf("VIOLATED LingerOnlyWhenIdle\n") :: else -> skip fi;
        if :: !(PromptStateClosed) -> printf("VIOLATED PromptStateClosed\n") :: else -> skip fi;
        if :: !(EgressOnlyThroughPolicy) -> printf("VIOLATED EgressOnlyThroughPolicy\n") :: else -> skip fi;
#endif
        assert(AllInvariants)
       }
#ifndef TLA_INVARIANTS_ONLY
    :: atomic { timeout -> printf("CHECK QuiescentStateClean\n"); assert(QuiescentStateClean) }
#endif
    od
}

/* ---------------------------------------------------------------------
 * Liveness properties (Lazaret.cfg PROPERTIES), checked with pan -a -f.
 * P ~> Q is [](P -> <>Q); \A over the fixture is a conjunction.
 * ------------------------------------------------------------------- */

#define SessNew(s)       (sessionPhase[s] == S_New)
#define SessResolved(s)  (sessionPhase[s] == S_Attached || \
                          sessionPhase[s] == S_Closed || sessionPhase[s] == S_Failed)
#define ReqVerified(r)   (requestPhase[r] == Q_Verified)
#define ReqResolved(r)   (requestPhase[r] == Q_Completed || requestPhase[r] == Q_Denied || \
                          requestPhase[r] == Q_TimedOut || requestPhase[r] == Q_Cancelled || \
                          requestPhase[r] == Q_Failed)
#define SessOffTerm(s)   (sessionPhase[s] == S_Prompting || sessionPhase[s] == S_HostExecuting)
#define TermRestored(s)  (terminalRoute[s] == T_Sandbox || terminalRoute[s] == T_Detached)
/* Interested(d) = {}, spelled out per fixture: the ltl parser cannot read
 * the conditional expression inside SessionDomain(s). */
#define IdleD1           (!InterestedPhase(sessionPhase[S1]) && \
                          !InterestedPhase(sessionPhase[S2]))
#define IdleD2           (!InterestedPhase(sessionPhase[S3]))
/* extension: the prompt of request r (in session s) is on the terminal */
#define PromptOpen(r, s) (requestPhase[r] == Q_AwaitingApproval && \
                          sessionPhase[s] == S_Prompting)
/* it ended: approved ([a], [s]), denied ([d], [q]), timed out, cancelled
 * (Ctrl-C, disconnect), failed (Domain failure) */
#define PromptEnded(r)   (requestPhase[r] == Q_Approved || requestPhase[r] == Q_Executing || \
                          ReqResolved(r))
#define Lingering(d)     (lingering[d])
#define Absent(d)        (domainPhase[d] == D_Absent)

/* (Spin's ltl parser wants a binary operator at the end of a line, not at
 * the start of the next one.) */

/* SessionEventuallyResolves ==
 *   \A s : sessionPhase[s] = "New" ~> sessionPhase[s] \in {"Attached","Closed","Failed"} */
ltl SessionEventuallyResolves {
    [] (
#if defined(FIXTURE_WIDE)
        (SessNew(S3) -> <> SessResolved(S3)) &&
#endif
        (SessNew(S1) -> <> SessResolved(S1)) &&
        (SessNew(S2) -> <> SessResolved(S2)))
}

/* RequestEventuallyResolves ==
 *   \A r : requestPhase[r] = "Verified" ~> requestPhase[r] \in TerminalRequestPhases */
ltl RequestEventuallyResolves {
    [] (
#if defined(FIXTURE_WIDE)
        (ReqVerified(R4) -> <> ReqResolved(R4)) &&
#endif
        (ReqVerified(R1) -> <> ReqResolved(R1)) &&
        (ReqVerified(R2) -> <> ReqResolved(R2)) &&
        (ReqVerified(R3) -> <> ReqResolved(R3)))
}

/* PromptEventuallyRestoresTerminal ==
 *   \A s : sessionPhase[s] \in {"Prompting","HostExecuting"}
 *            ~> terminalRoute[s] \in {"Sandbox","Detached"} */
ltl PromptEventuallyRestoresTerminal {
    [] (
#if defined(FIXTURE_WIDE)
        (SessOffTerm(S3) -> <> TermRestored(S3)) &&
#endif
        (SessOffTerm(S1) -> <> TermRestored(S1)) &&
        (SessOffTerm(S2) -> <> TermRestored(S2)))
}

/* EmptyDomainEventuallyStops ==
 *   \A d : (<>[](Interested(d) = {})) => <>(domainPhase[d] = "Absent")
 * Verbatim. Evaluated, as in TLA+, at the first state of a behaviour, where
 * Init already has domainPhase = "Absent": it holds on every behaviour,
 * whatever the protocol does (see the BUG_NO_TEARDOWN self-test). */
ltl EmptyDomainEventuallyStops {
#if defined(FIXTURE_WIDE)
    ((<> [] IdleD2) -> <> Absent(D2)) &&
#endif
    ((<> [] IdleD1) -> <> Absent(D1))
}

/* Not in the TLA+ model (extra, ours): what EmptyDomainEventuallyStops is
 * meant to say -- once the Domain stays idle for ever, it ends up stopped
 * for ever. */
ltl EmptyDomainStopsWhenIdle {
#if defined(FIXTURE_WIDE)
    ((<> [] IdleD2) -> <> [] Absent(D2)) &&
#endif
    ((<> [] IdleD1) -> <> [] Absent(D1))
}

/* Extension: PromptEventuallyEnds == \A r : the prompt of r is on the
 * terminal ~> r is approved, denied, timed out, cancelled or failed. The
 * developer's keys are not fair: this rests on PromptTimeout. */
ltl PromptEventuallyEnds {
    [] (
#if defined(FIXTURE_WIDE)
        (PromptOpen(R4, S3) -> <> PromptEnded(R4)) &&
#endif
#if defined(FIXTURE_ESC)
        (PromptOpen(R1, S1) -> <> PromptEnded(R1)) &&
        (PromptOpen(R2, S1) -> <> PromptEnded(R2)) &&
        (PromptOpen(R3, S2) -> <> PromptEnded(R3)))
#else
        (PromptOpen(R1, S1) -> <> PromptEnded(R1)) &&
        (PromptOpen(R2, S2) -> <> PromptEnded(R2)) &&
        (PromptOpen(R3, S1) -> <> PromptEnded(R3)))
#endif
}

/* Extension: DomainEventuallyStops == \A d : lingering[d] ~>
 *   (domainPhase[d] = "Absent" \/ Interested(d) # {}): a linger ends with
 * the Domain stopped unless a session joins during it. */
ltl DomainEventuallyStops {
    [] (
#if defined(FIXTURE_WIDE)
        (Lingering(D2) -> <> (Absent(D2) || !IdleD2)) &&
#endif
        (Lingering(D1) -> <> (Absent(D1) || !IdleD1)))
}
