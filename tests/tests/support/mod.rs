//! What the tests' own HTTPS servers (admission and conversion webhooks, an extension API
//! server) share: reading one HTTP/1.1 request off a connection.

use tokio::io::{AsyncRead, AsyncReadExt};

/// One request read off `conn`: its head (request line and headers) and its body (by
/// `Content-Length`); `None` when the peer goes away first.
pub async fn read_request<S: AsyncRead + Unpin>(conn: &mut S) -> Option<(String, Vec<u8>)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let (head_len, body_len) = loop {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (end + 4, len);
        }
    };
    while data.len() < head_len + body_len {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&data[..head_len]).into_owned();
    Some((head, data[head_len..head_len + body_len].to_vec()))
}
