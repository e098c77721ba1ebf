//! Errors as kube-apiserver writes them: a `metav1.Status` with the upstream code and reason,
//! so that kubectl prints `Error from server (NotFound): ...`.

use k1s_store::StoreError;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    ListMeta, Status, StatusCause, StatusDetails,
};

/// An API error: becomes a `Status` response.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    /// The upstream `StatusReason`, e.g. `NotFound`.
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Box<StatusDetails>>,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// 404 for a path the server does not serve (upstream's exact message).
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// Adds a cause (reason and message, no field) to the details.
    pub fn with_cause(mut self, reason: &str, message: impl Into<String>) -> Self {
        let d = self.details.get_or_insert_with(Default::default);
        d.causes.get_or_insert_with(Vec::new).push(StatusCause {
            field: None,
            message: Some(message.into()),
            reason: Some(reason.into()),
        });
        self
    }

    /// Tells the client when to retry (`details.retryAfterSeconds`).
    pub fn retry_after(mut self, seconds: i32) -> Self {
        self.details
            .get_or_insert_with(Default::default)
            .retry_after_seconds = Some(seconds);
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// A kubelet's refusal or failure as the API server passes it on (a transport failure,
    /// code 0, is 503).
    pub fn from_kubelet(e: k1s_api::client::ClientError) -> Self {
        k1s_streaming::Refusal::from_kubelet(e).into()
    }

    pub fn method_not_allowed(method: &http::Method) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    pub fn request_too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("the request body is larger than the limit of {limit} bytes"),
        )
    }

    /// 422 Invalid with one cause per offending field.
    pub fn invalid(kind: &str, name: &str, causes: Vec<(String, String)>) -> Self {
        let message = format!(
            "{kind} {name:?} is invalid: {}",
            causes
                .iter()
                .map(|(f, m)| format!("{f}: {m}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let causes = causes
            .into_iter()
            .map(|(field, message)| StatusCause {
                field: Some(field),
                message: Some(message),
                reason: Some("FieldValueInvalid".into()),
            })
            .collect();
        Self {
            code: 422,
            reason: "Invalid",
            message,
            details: Some(Box::new(StatusDetails {
                name: Some(name.into()),
                kind: Some(kind.into()),
                causes: Some(causes),
                ..Default::default()
            })),
        }
    }

    pub fn to_status(&self) -> Status {
        Status {
            code: Some(i32::from(self.code)),
            details: self.details.as_deref().cloned(),
            message: Some(self.message.clone()),
            metadata: ListMeta::default(),
            reason: Some(self.reason.into()),
            status: Some("Failure".into()),
        }
    }
}

impl From<k1s_streaming::Refusal> for ApiError {
    fn from(r: k1s_streaming::Refusal) -> Self {
        Self::new(r.code, r.reason, r.message)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let message = e.to_string();
        match e {
            StoreError::NotFound { .. } => Self::new(404, "NotFound", message),
            StoreError::AlreadyExists { .. } => Self::new(409, "AlreadyExists", message),
            StoreError::Conflict { .. } => Self::new(409, "Conflict", message),
            StoreError::Compacted { .. } | StoreError::WatcherTooSlow { .. } => {
                Self::new(410, "Expired", message)
            }
            StoreError::FutureRevision { .. } => Self::new(504, "Timeout", message),
            StoreError::InvalidArgument(_) => Self::new(400, "BadRequest", message),
            _ => Self::new(500, "InternalError", message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_json_is_what_kubectl_expects() {
        let v = serde_json::to_value(ApiError::no_route().to_status()).unwrap();
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["status"], "Failure");
        assert_eq!(v["reason"], "NotFound");
        assert_eq!(v["code"], 404);
    }

    #[test]
    fn store_errors_map_to_upstream_codes() {
        let cases = [
            (StoreError::NotFound { key: "k".into() }, 404, "NotFound"),
            (
                StoreError::AlreadyExists { key: "k".into() },
                409,
                "AlreadyExists",
            ),
            (
                StoreError::Conflict {
                    key: "k".into(),
                    expected: 1,
                    actual: 2,
                },
                409,
                "Conflict",
            ),
            (
                StoreError::Compacted {
                    requested: 1,
                    compacted: 5,
                },
                410,
                "Expired",
            ),
            (StoreError::Closed, 500, "InternalError"),
        ];
        for (err, code, reason) in cases {
            let api = ApiError::from(err);
            assert_eq!((api.code, api.reason), (code, reason));
        }
    }

    #[test]
    fn invalid_lists_causes() {
        let e = ApiError::invalid("Pod", "p", vec![("metadata.name".into(), "bad".into())]);
        let v = serde_json::to_value(e.to_status()).unwrap();
        assert_eq!(v["code"], 422);
        assert_eq!(v["details"]["causes"][0]["field"], "metadata.name");
    }
}
