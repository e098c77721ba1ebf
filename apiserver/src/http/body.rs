//! Response bodies (whole, or streamed for watches) and request body reading with upstream's
//! 3 MiB limit.

use std::convert::Infallible;

use bytes::Bytes;
use futures::Stream;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::Frame;

use crate::status::ApiError;

/// The response body type of every handler.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Largest request body accepted (kube-apiserver's `MaxRequestBodyBytes`).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// A whole body.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    UnsyncBoxBody::new(Full::new(bytes.into()))
}

/// A streamed body (chunked on HTTP/1.1).
pub fn streamed<S>(stream: S) -> Body
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    use futures::StreamExt;
    UnsyncBoxBody::new(StreamBody::new(
        stream.map(|b| Ok::<_, Infallible>(Frame::data(b))),
    ))
}

/// A response with a body and content type.
pub fn respond(code: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut resp = Response::new(full(body));
    *resp.status_mut() = code;
    if let Ok(ct) = HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    resp
}

/// Reads a request body, refusing more than [`MAX_BODY_BYTES`].
pub async fn read<B>(body: B) -> Result<Bytes, ApiError>
where
    B: hyper::body::Body,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(ApiError::request_too_large(MAX_BODY_BYTES))
        }
        Err(e) => Err(ApiError::bad_request(format!(
            "the request body could not be read: {e}"
        ))),
    }
}
