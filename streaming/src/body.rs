//! Response bodies: whole, or streamed (chunked on HTTP/1.1), as the API server and the
//! kubelet's port answer.

use std::convert::Infallible;

use bytes::Bytes;
use futures::Stream;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{Full, StreamBody};
use hyper::body::Frame;

/// The response body type of every handler.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

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
