//! Every server request, notification, approval kind and error kind of the tested Codex
//! releases, and what codex-relay does with each: the one list the schema gate
//! (`crates/codex/tests/all/schema_gate.rs`) checks each release's generated schema against, so
//! a name a new Codex adds fails the gate until it is handled or classified here.

/// What the relay does with a server notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotificationHandling {
    /// Read into its own type ([`super::ServerNotification`]) and mapped to session events.
    Mapped,
    /// Kept in the session's log as a raw `codex` event, as Codex sent it.
    Shown,
    /// Not shown: Codex's bookkeeping for its own UIs, or the stream of a request the relay
    /// never sends.
    Quiet,
}

/// What the relay does with a server request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestHandling {
    /// An approval card (approve, approve for session, deny, cancel): rules, notifications,
    /// answer links and every front apply; declined at its timeout.
    Approval,
    /// A question with its options, answered by a person or the session's handler.
    Question,
    /// An MCP server's form (elicitation), accepted or declined.
    Elicitation,
    /// A call of a dynamic tool the session registered, answered by its handler or a person.
    ToolCall,
    /// ChatGPT token refresh, answered by the relay's own login when it holds one.
    AuthRefresh,
    /// Shown as a pending request of kind `other` (answered with JSON); failed closed, with an
    /// error, at its timeout.
    Other,
    /// The v1 conversation API's: Codex sends it only on v1 conversations, never to the relay.
    V1Only,
}

/// How a failed turn's `codexErrorInfo` kind is classed (the library's error phases).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Out of budget or capacity: try later.
    Budget,
    /// The request itself was refused: asking again the same way does not help.
    Request,
    /// A request error, but a budget one when its HTTP status is 429.
    RequestUnless429,
    /// A tool failed (the sandbox, too many denials).
    Tool,
    /// Anything else went wrong answering.
    Response,
}

/// What the relay does with a kind (`kind`) of command approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalKindHandling {
    /// Shown and answered as a command approval.
    Card,
    /// Only sent to a client that declares a capability the relay does not declare.
    NotRequested,
}

/// What the relay does with a decision an approval offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionHandling {
    /// Offered to people (and rules) in the words given.
    Offered(&'static str),
    /// Not offered: the relay never sends it.
    NotOffered,
}

use NotificationHandling as N;
use RequestHandling as R;

/// Every server notification of the tested releases (0.98 and later).
pub const NOTIFICATIONS: &[(&str, NotificationHandling)] = &[
    ("account/gatewayOAuth/changed", N::Shown),
    ("account/login/completed", N::Shown),
    ("account/rateLimits/updated", N::Shown),
    ("account/updated", N::Shown),
    ("app/list/updated", N::Shown),
    ("authStatusChange", N::Shown),
    ("autoApprovalReview/strictReviewRequired", N::Shown),
    ("command/exec/outputDelta", N::Shown),
    ("configWarning", N::Shown),
    ("deprecationNotice", N::Shown),
    ("error", N::Mapped),
    ("externalAgentConfig/import/completed", N::Shown),
    ("externalAgentConfig/import/progress", N::Shown),
    ("fs/changed", N::Shown),
    ("fuzzyFileSearch/sessionCompleted", N::Shown),
    ("fuzzyFileSearch/sessionUpdated", N::Shown),
    ("guardianWarning", N::Shown),
    ("hook/completed", N::Shown),
    ("hook/started", N::Shown),
    ("item/agentMessage/delta", N::Mapped),
    ("item/autoApprovalReview/completed", N::Shown),
    ("item/autoApprovalReview/started", N::Shown),
    ("item/commandExecution/outputDelta", N::Mapped),
    ("item/commandExecution/terminalInteraction", N::Shown),
    ("item/completed", N::Mapped),
    ("item/fileChange/outputDelta", N::Shown),
    ("item/fileChange/patchUpdated", N::Shown),
    ("item/mcpToolCall/progress", N::Shown),
    ("item/plan/delta", N::Shown),
    ("item/reasoning/summaryPartAdded", N::Shown),
    ("item/reasoning/summaryTextDelta", N::Mapped),
    ("item/reasoning/textDelta", N::Mapped),
    ("item/started", N::Mapped),
    ("loginChatGptComplete", N::Shown),
    ("mcpServer/event/stream/notification", N::Shown),
    ("mcpServer/oauthLogin/completed", N::Shown),
    ("mcpServer/startupStatus/updated", N::Shown),
    ("model/rerouted", N::Shown),
    ("model/safetyBuffering/updated", N::Shown),
    ("model/verification", N::Shown),
    ("modelProvider/authRecoveryCompleted", N::Shown),
    ("modelProvider/authRecoveryStarted", N::Shown),
    ("process/exited", N::Shown),
    ("process/outputDelta", N::Shown),
    ("project/changed", N::Shown),
    ("rawResponseItem/completed", N::Shown),
    ("remoteControl/status/changed", N::Shown),
    ("serverRequest/resolved", N::Mapped),
    ("sessionConfigured", N::Shown),
    ("skills/changed", N::Shown),
    ("thread/archived", N::Shown),
    ("thread/attachment/updated", N::Shown),
    ("thread/closed", N::Shown),
    ("thread/compacted", N::Shown),
    ("thread/deleted", N::Shown),
    ("thread/environment/connected", N::Shown),
    ("thread/environment/disconnected", N::Shown),
    ("thread/goal/cleared", N::Shown),
    ("thread/goal/updated", N::Shown),
    ("thread/name/updated", N::Shown),
    ("thread/prediction/updated", N::Shown),
    ("thread/project/updated", N::Shown),
    ("thread/queue/changed", N::Shown),
    ("thread/readState/changed", N::Quiet),
    ("thread/realtime/closed", N::Shown),
    ("thread/realtime/error", N::Shown),
    ("thread/realtime/item/completed", N::Shown),
    ("thread/realtime/item/started", N::Shown),
    ("thread/realtime/item/transcript/delta", N::Shown),
    ("thread/realtime/itemAdded", N::Shown),
    ("thread/realtime/outputAudio/delta", N::Shown),
    ("thread/realtime/sdp", N::Shown),
    ("thread/realtime/started", N::Shown),
    ("thread/realtime/transcript/delta", N::Shown),
    ("thread/realtime/transcript/done", N::Shown),
    ("thread/reverted", N::Shown),
    // 0.171: the results of `thread/search/stream` (experimental), which the relay never sends.
    ("thread/search/partial", N::Quiet),
    ("thread/section/changed", N::Shown),
    ("thread/settings/updated", N::Shown),
    ("thread/started", N::Mapped),
    ("thread/status/changed", N::Mapped),
    ("thread/tokenUsage/updated", N::Mapped),
    ("thread/unarchived", N::Shown),
    ("turn/completed", N::Mapped),
    ("turn/diff/updated", N::Mapped),
    ("turn/moderationMetadata", N::Shown),
    ("turn/plan/updated", N::Mapped),
    ("turn/started", N::Mapped),
    ("warning", N::Shown),
    ("windows/worldWritableWarning", N::Shown),
    ("windowsSandbox/setupCompleted", N::Shown),
];

/// Every server request of the tested releases.
pub const SERVER_REQUESTS: &[(&str, RequestHandling)] = &[
    ("item/commandExecution/requestApproval", R::Approval),
    ("item/fileChange/requestApproval", R::Approval),
    ("item/permissions/requestApproval", R::Approval),
    ("mcpServer/elicitation/request", R::Elicitation),
    ("item/tool/requestUserInput", R::Question),
    ("item/tool/call", R::ToolCall),
    ("account/chatgptAuthTokens/refresh", R::AuthRefresh),
    ("attestation/generate", R::Other),
    ("currentTime/read", R::Other),
    ("execCommandApproval", R::V1Only),
    ("applyPatchApproval", R::V1Only),
];

/// Every `kind` of `item/commandExecution/requestApproval`.
pub const COMMAND_APPROVAL_KINDS: &[(&str, ApprovalKindHandling)] = &[
    ("command", ApprovalKindHandling::Card),
    // Input for a command already running: the same card, the same decisions.
    ("writeStdin", ApprovalKindHandling::Card),
    // Needs the `requiredHumanApproval` initialize capability.
    ("humanCommand", ApprovalKindHandling::NotRequested),
];

/// Every decision of a command approval.
pub const COMMAND_DECISIONS: &[(&str, DecisionHandling)] = &[
    ("accept", DecisionHandling::Offered("approve")),
    (
        "acceptForSession",
        DecisionHandling::Offered("approve for session"),
    ),
    (
        "acceptWithExecpolicyAmendment",
        DecisionHandling::Offered("approve with codex rule"),
    ),
    ("applyNetworkPolicyAmendment", DecisionHandling::NotOffered),
    ("decline", DecisionHandling::Offered("deny")),
    ("cancel", DecisionHandling::Offered("cancel")),
];

/// Every decision of a file-change approval.
pub const FILE_CHANGE_DECISIONS: &[(&str, DecisionHandling)] = &[
    ("accept", DecisionHandling::Offered("approve")),
    (
        "acceptForSession",
        DecisionHandling::Offered("approve for session"),
    ),
    ("decline", DecisionHandling::Offered("deny")),
    ("cancel", DecisionHandling::Offered("cancel")),
];

/// Every `codexErrorInfo` kind of the tested releases (camelCase; older servers spell them in
/// snake_case, which [`error_class`] accepts too).
pub const ERROR_KINDS: &[(&str, ErrorClass)] = &[
    ("usageLimitExceeded", ErrorClass::Budget),
    ("rateLimitExceeded", ErrorClass::Budget),
    ("sessionBudgetExceeded", ErrorClass::Budget),
    ("modelCap", ErrorClass::Budget),
    ("flexUnavailable", ErrorClass::Budget),
    ("serverOverloaded", ErrorClass::Budget),
    ("policyCapacityUnavailable", ErrorClass::Budget),
    ("httpConnectionFailed", ErrorClass::RequestUnless429),
    (
        "responseStreamConnectionFailed",
        ErrorClass::RequestUnless429,
    ),
    ("responseStreamDisconnected", ErrorClass::RequestUnless429),
    (
        "responseTooManyFailedAttempts",
        ErrorClass::RequestUnless429,
    ),
    ("unauthorized", ErrorClass::Request),
    ("badRequest", ErrorClass::Request),
    ("contextWindowExceeded", ErrorClass::Request),
    ("modelNotFound", ErrorClass::Request),
    ("cyberPolicy", ErrorClass::Request),
    // 0.171: refused by the biology safety policy, like `cyberPolicy`.
    ("bioPolicy", ErrorClass::Request),
    ("misalignmentPolicyViolation", ErrorClass::Request),
    ("inferenceHookDenied", ErrorClass::Request),
    ("activeTurnNotSteerable", ErrorClass::Request),
    ("sandboxError", ErrorClass::Tool),
    ("tooManyDenials", ErrorClass::Tool),
    ("internalServerError", ErrorClass::Response),
    ("threadRollbackFailed", ErrorClass::Response),
    ("other", ErrorClass::Response),
];

/// How the relay handles a notification; `None` for a name this list does not know (it is
/// kept as a raw `codex` event, and the schema gate fails until it is classified).
pub fn notification(method: &str) -> Option<NotificationHandling> {
    NOTIFICATIONS
        .iter()
        .find(|(m, _)| *m == method)
        .map(|(_, h)| *h)
}

/// How the relay handles a server request; `None` for a name this list does not know.
pub fn server_request(method: &str) -> Option<RequestHandling> {
    SERVER_REQUESTS
        .iter()
        .find(|(m, _)| *m == method)
        .map(|(_, h)| *h)
}

/// The class of a `codexErrorInfo` kind in either spelling (`bioPolicy`, `bio_policy`); `None`
/// for a kind this list does not know.
pub fn error_class(kind: &str) -> Option<ErrorClass> {
    let folded = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '_')
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let kind = folded(kind);
    ERROR_KINDS
        .iter()
        .find(|(k, _)| folded(k) == kind)
        .map(|(_, c)| *c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::Params;
    use crate::v2::{ServerNotification, ServerRequest};
    use serde_json::json;

    /// The list says what the code does: a notification is `Mapped` exactly when it is read
    /// into its own type.
    #[test]
    fn mapped_notifications_are_exactly_the_typed_ones() {
        for (method, handling) in NOTIFICATIONS {
            let parsed = ServerNotification::try_from_params(method, &Params::from(json!({})));
            let typed = !matches!(parsed, Ok(ServerNotification::Unknown { .. }));
            assert_eq!(
                typed,
                *handling == NotificationHandling::Mapped,
                "{method} is listed {handling:?} but the parser {} it",
                if typed { "types" } else { "does not type" }
            );
        }
    }

    /// Every request the list gives its own handling is read into its own type; `Other` and
    /// `V1Only` ones are kept raw.
    #[test]
    fn handled_requests_are_exactly_the_typed_ones() {
        for (method, handling) in SERVER_REQUESTS {
            let parsed = ServerRequest::try_from_params(method, &Params::from(json!({})));
            let typed = !matches!(parsed, Ok(ServerRequest::Unknown { .. }));
            let raw = matches!(handling, RequestHandling::Other | RequestHandling::V1Only);
            assert_eq!(typed, !raw, "{method} is listed {handling:?}");
        }
    }

    #[test]
    fn no_name_is_listed_twice() {
        fn unique(names: impl Iterator<Item = &'static str>) {
            let mut seen = std::collections::BTreeSet::new();
            for n in names {
                assert!(seen.insert(n), "{n} is listed twice");
            }
        }
        unique(NOTIFICATIONS.iter().map(|(m, _)| *m));
        unique(SERVER_REQUESTS.iter().map(|(m, _)| *m));
        unique(ERROR_KINDS.iter().map(|(m, _)| *m));
    }

    #[test]
    fn error_kinds_in_both_spellings() {
        assert_eq!(error_class("cyberPolicy"), Some(ErrorClass::Request));
        assert_eq!(error_class("cyber_policy"), Some(ErrorClass::Request));
        assert_eq!(error_class("somethingNew"), None);
    }
}
