//! Response bodies (whole, or streamed for watches) and request body reading with upstream's
//! 3 MiB limit.

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};

use crate::status::ApiError;
pub use k1s_streaming::body::{Body, full, respond, streamed};

/// Largest request body accepted (kube-apiserver's `MaxRequestBodyBytes`).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Reads a request body, refusing more than [`MAX_BODY_BYTES`]. A body whose declared length
/// (`Content-Length`) is over the limit is refused before any of it is read: a client that
/// asked `Expect: 100-continue` (curl does for large bodies) is never told to send it, and gets
/// the 413 instead of a connection closed under its upload.
pub async fn read<B>(body: B) -> Result<Bytes, ApiError>
where
    B: hyper::body::Body,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    if body.size_hint().lower() > MAX_BODY_BYTES as u64 {
        return Err(ApiError::request_too_large(MAX_BODY_BYTES));
    }
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

impl ApiError {
    /// The JSON response kube-apiserver would send.
    pub fn into_response(self) -> Response<Body> {
        let body = serde_json::to_vec(&self.to_status()).unwrap_or_default();
        let mut resp = Response::new(full(Bytes::from(body)));
        *resp.status_mut() =
            StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        resp
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::*;
    use http_body_util::StreamBody;
    use hyper::body::Frame;

    /// A body that declares `len` bytes and must not be read.
    struct Declared {
        len: u64,
    }

    impl hyper::body::Body for Declared {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            panic!("a body declared too large was read")
        }

        fn size_hint(&self) -> hyper::body::SizeHint {
            hyper::body::SizeHint::with_exact(self.len)
        }
    }

    fn chunks(sizes: &[usize]) -> impl hyper::body::Body<Data = Bytes, Error = std::io::Error> {
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = sizes
            .iter()
            .map(|n| Ok(Frame::data(Bytes::from(vec![b'x'; *n]))))
            .collect();
        StreamBody::new(futures::stream::iter(frames))
    }

    #[tokio::test]
    async fn bodies_over_the_limit_get_413_declared_or_not() {
        let declared = read(Declared {
            len: MAX_BODY_BYTES as u64 + 1,
        })
        .await
        .unwrap_err();
        assert_eq!(
            (declared.code, declared.reason),
            (413, "RequestEntityTooLarge")
        );
        // Chunked, no length given: refused once the limit is passed.
        let half = MAX_BODY_BYTES / 2;
        let streamed = read(chunks(&[half, half, 1])).await.unwrap_err();
        assert_eq!(streamed.code, 413);
        // Up to the limit exactly: read whole.
        assert_eq!(
            read(chunks(&[half, MAX_BODY_BYTES - half]))
                .await
                .unwrap()
                .len(),
            MAX_BODY_BYTES
        );
    }
}
