//! [`PatchError`]: every way a PATCH can fail, and the Kubernetes `Status`
//! (HTTP code, reason, message) kube-apiserver v1.33 answers for it.
//!
//! Upstream produces these answers in `k8s.io/apiserver/pkg/endpoints/handlers/patch.go`
//! (`applyJSPatch`, `strategicPatchObject`, `interpretStrategicMergePatchError`)
//! and in the media-type check of the patch handler. Three shapes occur:
//!
//! * `BadRequest` (400) / `RequestEntityTooLarge` (413) / `UnsupportedMediaType`
//!   (415): `Status.message` is the error text.
//! * `Invalid` (422) built with `NewGenericServerResponse`: `Status.message` is
//!   the fixed text "the server rejected our request due to an error in our
//!   request" and the error text goes into `details.causes[0].message` with
//!   cause `reason` "UnexpectedServerResponse". See [`PatchError::status_message`]
//!   and [`PatchError::cause`].
//! * Errors upstream does not translate (500, empty reason, message = error
//!   text): see [`PatchError::StrategicMerge`].

/// The strategic-merge-patch directives whose malformed use upstream reports
/// with a fixed message and 400 BadRequest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmpDirective {
    /// `$deleteFromPrimitiveList/<field>`.
    DeleteFromPrimitiveList,
    /// `$retainKeys`.
    RetainKeys,
    /// `$setElementOrder/<field>`.
    SetElementOrder,
}

impl SmpDirective {
    fn message(self) -> &'static str {
        match self {
            Self::DeleteFromPrimitiveList => "invalid patch format of primitive list",
            Self::RetainKeys => "invalid patch format of retainKeys",
            Self::SetElementOrder => "invalid patch format of setElementOrder list",
        }
    }
}

/// Why a patch could not be applied. [`PatchError::http_status`],
/// [`PatchError::reason`], [`PatchError::status_message`] and
/// [`PatchError::cause`] give the `metav1.Status` to answer with.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum PatchError {
    /// 400 BadRequest: the body is not a well-formed document of its patch
    /// type (not JSON, a JSON patch that is not an array of operation
    /// objects, a merge patch that is `null` or a scalar, a strategic merge
    /// patch that is not an object).
    #[error("{0}")]
    Malformed(String),

    /// 400 BadRequest: the patch nests deeper than [`super::MAX_DEPTH`] (or a
    /// JSON patch would place a value deeper than that). Upstream bounds
    /// nesting only through its JSON decoder; this is k1s' guard.
    #[error("patch nesting exceeds the maximum depth of {max}")]
    TooDeep { max: usize },

    /// 413 RequestEntityTooLarge: more JSON patch operations than upstream's
    /// `maxJSONPatchOperations` (10000).
    #[error("The allowed maximum operations in a JSON patch is {max}, got {got}")]
    TooManyOperations { max: usize, got: usize },

    /// 422 Invalid (generic server response): a JSON patch operation does not
    /// apply: missing path or key, array index out of bounds, unknown `op`,
    /// missing `value`/`from`, copy size limit exceeded.
    #[error("{0}")]
    JsonPatchFailed(String),

    /// 422 Invalid (generic server response): a JSON patch `test` operation
    /// found a different value.
    #[error("testing value {path} failed: test failed")]
    TestFailed { path: String },

    /// 422 Invalid: the patched document is not a JSON object (e.g. a merge
    /// patch that is an array, or a JSON patch replacing the root with one).
    /// Upstream fails to decode the result into the object and answers 422.
    #[error("the patched document is not a JSON object")]
    NotAnObject,

    /// 415 UnsupportedMediaType: strategic merge patch requested for a kind
    /// without patch metadata (custom resources). The message is upstream's
    /// media-type rejection listing what custom resources accept.
    #[error(
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )]
    StrategicMergeUnsupported,

    /// 400 BadRequest: a strategic merge patch directive is malformed
    /// (`$retainKeys` not a list or not covering the patched keys, a
    /// `$setElementOrder/…` or `$deleteFromPrimitiveList/…` key without a
    /// field name, a `$setElementOrder` value that is not a list).
    #[error("{}", .0.message())]
    BadDirective(SmpDirective),

    /// 422 Invalid (generic server response): a strategic merge patch merges
    /// a list whose elements are lists ("lists of lists are not supported").
    #[error("lists of lists are not supported")]
    ListOfLists,

    /// Any other strategic merge patch failure: unknown `$patch` value,
    /// `$patch: merge` in a list, an element of a merge list without its
    /// merge key, mixed element types in a merge list, a `$setElementOrder`
    /// list that contradicts the patch list's order.
    ///
    /// Upstream does not translate these into a `Status`, so kube-apiserver
    /// answers 500 with an empty reason and the error text as message;
    /// [`PatchError::http_status`] reports exactly that.
    #[error("{0}")]
    StrategicMerge(String),
}

/// `Status.message` of upstream's generic 422 response.
const GENERIC_INVALID_MESSAGE: &str =
    "the server rejected our request due to an error in our request";

impl PatchError {
    /// HTTP status code kube-apiserver answers with.
    pub fn http_status(&self) -> u16 {
        match self {
            Self::Malformed(_) | Self::TooDeep { .. } | Self::BadDirective(_) => 400,
            Self::TooManyOperations { .. } => 413,
            Self::StrategicMergeUnsupported => 415,
            Self::JsonPatchFailed(_)
            | Self::TestFailed { .. }
            | Self::NotAnObject
            | Self::ListOfLists => 422,
            Self::StrategicMerge(_) => 500,
        }
    }

    /// `metav1.StatusReason` of the answer (`""` means "unknown").
    pub fn reason(&self) -> &'static str {
        match self.http_status() {
            400 => "BadRequest",
            413 => "RequestEntityTooLarge",
            415 => "UnsupportedMediaType",
            422 => "Invalid",
            _ => "",
        }
    }

    /// `Status.message` of the answer. For the generic 422 answers this is
    /// upstream's fixed text and the specific text is [`PatchError::cause`].
    pub fn status_message(&self) -> String {
        match self {
            Self::TooManyOperations { .. } => format!("Request entity too large: {self}"),
            _ if self.cause().is_some() => GENERIC_INVALID_MESSAGE.to_owned(),
            _ => self.to_string(),
        }
    }

    /// For upstream's generic 422 answers, the text to put in
    /// `details.causes[0].message` (with cause reason
    /// `"UnexpectedServerResponse"`); `None` for every other error.
    pub fn cause(&self) -> Option<String> {
        match self {
            Self::JsonPatchFailed(_) | Self::TestFailed { .. } | Self::ListOfLists => {
                Some(self.to_string())
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_mapping() {
        let cases = [
            (
                PatchError::Malformed("x".into()),
                400,
                "BadRequest",
                "x",
                None,
            ),
            (
                PatchError::TooDeep { max: 100 },
                400,
                "BadRequest",
                "patch nesting exceeds the maximum depth of 100",
                None,
            ),
            (
                PatchError::TooManyOperations {
                    max: 10000,
                    got: 10001,
                },
                413,
                "RequestEntityTooLarge",
                "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001",
                None,
            ),
            (
                PatchError::TestFailed { path: "/a".into() },
                422,
                "Invalid",
                GENERIC_INVALID_MESSAGE,
                Some("testing value /a failed: test failed"),
            ),
            (
                PatchError::NotAnObject,
                422,
                "Invalid",
                "the patched document is not a JSON object",
                None,
            ),
            (
                PatchError::BadDirective(SmpDirective::RetainKeys),
                400,
                "BadRequest",
                "invalid patch format of retainKeys",
                None,
            ),
            (
                PatchError::ListOfLists,
                422,
                "Invalid",
                GENERIC_INVALID_MESSAGE,
                Some("lists of lists are not supported"),
            ),
            (
                PatchError::StrategicMerge("boom".into()),
                500,
                "",
                "boom",
                None,
            ),
        ];
        for (err, code, reason, message, cause) in cases {
            assert_eq!(err.http_status(), code, "{err:?}");
            assert_eq!(err.reason(), reason, "{err:?}");
            assert_eq!(err.status_message(), message, "{err:?}");
            assert_eq!(err.cause().as_deref(), cause, "{err:?}");
        }
        assert_eq!(PatchError::StrategicMergeUnsupported.http_status(), 415);
    }
}
