//! SPDY/3.1 as the Kubernetes streaming clients speak it (client-go over moby/spdystream):
//! frame encoding and decoding, header blocks compressed with zlib and the SPDY/3 dictionary,
//! and a server session that hands out the streams a client opens.
//!
//! Only what a server of `exec`, `attach` and `portforward` needs: the client opens every
//! stream (SYN_STREAM, answered at once with SYN_REPLY), both sides send DATA and half-close
//! with FIN, RST_STREAM aborts a stream, PINGs are echoed, GOAWAY ends the session.
//! SETTINGS, HEADERS and WINDOW_UPDATE frames are read and ignored: spdystream neither sends
//! window updates nor honours them, so a server that waited for its send window to reopen
//! would stall every transfer beyond 64 KiB.

use std::collections::HashMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The protocol version in every control frame.
const VERSION: u16 = 3;
/// Largest DATA payload this server writes in one frame.
const MAX_DATA: usize = 32 * 1024;
/// Largest frame accepted (the 24-bit length allows 16 MiB; spdystream writes far less).
const MAX_FRAME: usize = 1 << 24;
/// Largest decompressed header block accepted.
const MAX_HEADER_BLOCK: usize = 256 * 1024;

pub const FLAG_FIN: u8 = 0x01;

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const SETTINGS: u16 = 4;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const WINDOW_UPDATE: u16 = 9;

/// RST_STREAM status codes.
pub const RST_PROTOCOL_ERROR: u32 = 1;
pub const RST_CANCEL: u32 = 5;

/// Why a SPDY frame or header block cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SpdyError {
    #[error("spdy: unsupported protocol version {0}")]
    Version(u16),
    #[error("spdy: frame of {0} bytes is too large")]
    TooLarge(usize),
    #[error("spdy: malformed {0} frame")]
    Malformed(&'static str),
    #[error("spdy: header block: {0}")]
    Headers(String),
    #[error("spdy: {0}")]
    Io(#[from] std::io::Error),
}

/// A decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    SynStream {
        stream_id: u32,
        associated_to: u32,
        priority: u8,
        flags: u8,
        headers: Vec<(String, String)>,
    },
    SynReply {
        stream_id: u32,
        flags: u8,
        headers: Vec<(String, String)>,
    },
    RstStream {
        stream_id: u32,
        status: u32,
    },
    Settings,
    Ping(u32),
    GoAway {
        last_stream_id: u32,
        status: u32,
    },
    Headers {
        stream_id: u32,
        flags: u8,
        headers: Vec<(String, String)>,
    },
    WindowUpdate {
        stream_id: u32,
        delta: u32,
    },
    Data {
        stream_id: u32,
        flags: u8,
        data: Bytes,
    },
    /// A control frame type this server does not know (skipped, as the spec asks).
    Unknown(u16),
}

/// The SPDY/3 header compression dictionary (SPDY/3 draft, section 2.6.10.1): a list of
/// length-prefixed strings followed by a run of common header values.
pub fn dictionary() -> &'static [u8] {
    static DICT: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    DICT.get_or_init(|| {
        const WORDS: &[&str] = &[
            "options",
            "head",
            "post",
            "put",
            "delete",
            "trace",
            "accept",
            "accept-charset",
            "accept-encoding",
            "accept-language",
            "accept-ranges",
            "age",
            "allow",
            "authorization",
            "cache-control",
            "connection",
            "content-base",
            "content-encoding",
            "content-language",
            "content-length",
            "content-location",
            "content-md5",
            "content-range",
            "content-type",
            "date",
            "etag",
            "expect",
            "expires",
            "from",
            "host",
            "if-match",
            "if-modified-since",
            "if-none-match",
            "if-range",
            "if-unmodified-since",
            "last-modified",
            "location",
            "max-forwards",
            "pragma",
            "proxy-authenticate",
            "proxy-authorization",
            "range",
            "referer",
            "retry-after",
            "server",
            "te",
            "trailer",
            "transfer-encoding",
            "upgrade",
            "user-agent",
            "vary",
            "via",
            "warning",
            "www-authenticate",
            "method",
            "get",
            "status",
            "200 OK",
            "version",
            "HTTP/1.1",
            "url",
            "public",
            "set-cookie",
            "keep-alive",
            "origin",
        ];
        const TAIL: &str = "100101201202205206300302303304305306307402405406407408409410411\
412413414415416417502504505203 Non-Authoritative Information204 No Content301 Moved \
Permanently400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server \
Error501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov \
Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,\
image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivate\
max-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.";
        let mut d = Vec::with_capacity(1423);
        for w in WORDS {
            d.extend_from_slice(&(w.len() as u32).to_be_bytes());
            d.extend_from_slice(w.as_bytes());
        }
        d.extend_from_slice(TAIL.as_bytes());
        d
    })
}

/// The compressing side of a connection's header blocks: one zlib stream for the whole
/// connection, flushed (sync) after each block.
pub struct HeaderEncoder {
    z: Compress,
}

impl Default for HeaderEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl HeaderEncoder {
    pub fn new() -> Self {
        let mut z = Compress::new(Compression::default(), true);
        // Only fails for a dictionary set after compression began.
        let _ = z.set_dictionary(dictionary());
        Self { z }
    }

    /// The compressed block of `headers` (names lower-cased, as SPDY/3 requires).
    pub fn encode(&mut self, headers: &[(String, String)]) -> Result<Vec<u8>, SpdyError> {
        let mut plain = Vec::new();
        plain.put_u32(headers.len() as u32);
        for (k, v) in headers {
            let k = k.to_ascii_lowercase();
            plain.put_u32(k.len() as u32);
            plain.extend_from_slice(k.as_bytes());
            plain.put_u32(v.len() as u32);
            plain.extend_from_slice(v.as_bytes());
        }
        let mut out = Vec::with_capacity(plain.len() + 64);
        let mut input = &plain[..];
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(out.capacity().max(256));
            }
            let before = self.z.total_in();
            self.z
                .compress_vec(input, &mut out, FlushCompress::Sync)
                .map_err(|e| SpdyError::Headers(e.to_string()))?;
            let used = (self.z.total_in() - before) as usize;
            input = &input[used..];
            // A sync flush is complete once all input is taken and output space is left over.
            if input.is_empty() && out.len() < out.capacity() {
                return Ok(out);
            }
        }
    }
}

/// The decompressing side of a connection's header blocks.
pub struct HeaderDecoder {
    z: Decompress,
}

impl Default for HeaderDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl HeaderDecoder {
    pub fn new() -> Self {
        Self {
            z: Decompress::new(true),
        }
    }

    /// Decodes one compressed header block. Names are lower-cased; a value holding several
    /// NUL-separated values is kept whole.
    pub fn decode(&mut self, block: &[u8]) -> Result<Vec<(String, String)>, SpdyError> {
        let mut out: Vec<u8> = Vec::with_capacity(block.len() * 4 + 64);
        let mut input = block;
        loop {
            if out.capacity() - out.len() < 256 {
                out.reserve(out.capacity().max(1024));
            }
            if out.len() > MAX_HEADER_BLOCK {
                return Err(SpdyError::Headers("header block too large".into()));
            }
            let before = self.z.total_in();
            match self
                .z
                .decompress_vec(input, &mut out, FlushDecompress::Sync)
            {
                Ok(status) => {
                    let used = (self.z.total_in() - before) as usize;
                    input = &input[used..];
                    if matches!(status, Status::StreamEnd)
                        || (input.is_empty() && out.len() < out.capacity())
                    {
                        break;
                    }
                    if used == 0 && matches!(status, Status::BufError) && input.is_empty() {
                        break;
                    }
                }
                Err(e) if e.needs_dictionary().is_some() => {
                    let used = (self.z.total_in() - before) as usize;
                    input = &input[used..];
                    self.z
                        .set_dictionary(dictionary())
                        .map_err(|e| SpdyError::Headers(e.to_string()))?;
                }
                Err(e) => return Err(SpdyError::Headers(e.to_string())),
            }
        }
        parse_header_block(&out)
    }
}

fn parse_header_block(mut b: &[u8]) -> Result<Vec<(String, String)>, SpdyError> {
    let bad = || SpdyError::Headers("truncated header block".into());
    let take = |b: &mut &[u8]| -> Result<String, SpdyError> {
        if b.len() < 4 {
            return Err(bad());
        }
        let n = b.get_u32() as usize;
        if b.len() < n {
            return Err(bad());
        }
        let s = String::from_utf8_lossy(&b[..n]).into_owned();
        b.advance(n);
        Ok(s)
    };
    if b.len() < 4 {
        return Err(bad());
    }
    let n = b.get_u32() as usize;
    let mut headers = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        let k = take(&mut b)?.to_ascii_lowercase();
        let v = take(&mut b)?;
        headers.push((k, v));
    }
    Ok(headers)
}

/// Writes frames: owns the connection's header compressor.
pub struct FrameWriter {
    headers: HeaderEncoder,
}

impl Default for FrameWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameWriter {
    pub fn new() -> Self {
        Self {
            headers: HeaderEncoder::new(),
        }
    }

    /// The bytes of `frame`.
    pub fn encode(&mut self, frame: &Frame) -> Result<BytesMut, SpdyError> {
        let mut b = BytesMut::new();
        let control = |b: &mut BytesMut, kind: u16, flags: u8, body: &[u8]| {
            b.put_u16(0x8000 | VERSION);
            b.put_u16(kind);
            b.put_u32(((flags as u32) << 24) | body.len() as u32);
            b.extend_from_slice(body);
        };
        match frame {
            Frame::SynStream {
                stream_id,
                associated_to,
                priority,
                flags,
                headers,
            } => {
                let mut body = Vec::new();
                body.put_u32(stream_id & 0x7fff_ffff);
                body.put_u32(associated_to & 0x7fff_ffff);
                body.put_u8((priority & 0x7) << 5);
                body.put_u8(0);
                body.extend(self.headers.encode(headers)?);
                control(&mut b, SYN_STREAM, *flags, &body);
            }
            Frame::SynReply {
                stream_id,
                flags,
                headers,
            }
            | Frame::Headers {
                stream_id,
                flags,
                headers,
            } => {
                let kind = if matches!(frame, Frame::SynReply { .. }) {
                    SYN_REPLY
                } else {
                    HEADERS
                };
                let mut body = Vec::new();
                body.put_u32(stream_id & 0x7fff_ffff);
                body.extend(self.headers.encode(headers)?);
                control(&mut b, kind, *flags, &body);
            }
            Frame::RstStream { stream_id, status } => {
                let mut body = Vec::new();
                body.put_u32(stream_id & 0x7fff_ffff);
                body.put_u32(*status);
                control(&mut b, RST_STREAM, 0, &body);
            }
            Frame::Settings => {
                control(&mut b, SETTINGS, 0, &0u32.to_be_bytes());
            }
            Frame::Ping(id) => control(&mut b, PING, 0, &id.to_be_bytes()),
            Frame::GoAway {
                last_stream_id,
                status,
            } => {
                let mut body = Vec::new();
                body.put_u32(last_stream_id & 0x7fff_ffff);
                body.put_u32(*status);
                control(&mut b, GOAWAY, 0, &body);
            }
            Frame::WindowUpdate { stream_id, delta } => {
                let mut body = Vec::new();
                body.put_u32(stream_id & 0x7fff_ffff);
                body.put_u32(delta & 0x7fff_ffff);
                control(&mut b, WINDOW_UPDATE, 0, &body);
            }
            Frame::Data {
                stream_id,
                flags,
                data,
            } => {
                if data.len() >= MAX_FRAME {
                    return Err(SpdyError::TooLarge(data.len()));
                }
                b.put_u32(stream_id & 0x7fff_ffff);
                b.put_u32(((*flags as u32) << 24) | data.len() as u32);
                b.extend_from_slice(data);
            }
            Frame::Unknown(kind) => control(&mut b, *kind, 0, &[]),
        }
        Ok(b)
    }
}

/// Reads frames: owns the connection's header decompressor.
pub struct FrameReader {
    headers: HeaderDecoder,
}

impl Default for FrameReader {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameReader {
    pub fn new() -> Self {
        Self {
            headers: HeaderDecoder::new(),
        }
    }

    /// Reads the next frame; `None` at a clean end of input.
    pub async fn read<R: AsyncRead + Unpin>(
        &mut self,
        r: &mut R,
    ) -> Result<Option<Frame>, SpdyError> {
        let mut head = [0u8; 8];
        match r.read_exact(&mut head[..1]).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        r.read_exact(&mut head[1..]).await?;
        let len = u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize;
        let flags = head[4];
        if len >= MAX_FRAME {
            return Err(SpdyError::TooLarge(len));
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body).await?;
        self.decode(&head, flags, &body).map(Some)
    }

    /// Decodes a frame from its 8-byte head and its body.
    pub fn decode(&mut self, head: &[u8; 8], flags: u8, body: &[u8]) -> Result<Frame, SpdyError> {
        let mut b = body;
        if head[0] & 0x80 == 0 {
            let stream_id = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) & 0x7fff_ffff;
            return Ok(Frame::Data {
                stream_id,
                flags,
                data: Bytes::copy_from_slice(body),
            });
        }
        let version = u16::from_be_bytes([head[0], head[1]]) & 0x7fff;
        let kind = u16::from_be_bytes([head[2], head[3]]);
        if version != VERSION {
            return Err(SpdyError::Version(version));
        }
        let need = |n: usize, name: &'static str| {
            if body.len() < n {
                Err(SpdyError::Malformed(name))
            } else {
                Ok(())
            }
        };
        Ok(match kind {
            SYN_STREAM => {
                need(10, "SYN_STREAM")?;
                let stream_id = b.get_u32() & 0x7fff_ffff;
                let associated_to = b.get_u32() & 0x7fff_ffff;
                let priority = b.get_u8() >> 5;
                b.advance(1);
                Frame::SynStream {
                    stream_id,
                    associated_to,
                    priority,
                    flags,
                    headers: self.headers.decode(b)?,
                }
            }
            SYN_REPLY | HEADERS => {
                need(4, "SYN_REPLY")?;
                let stream_id = b.get_u32() & 0x7fff_ffff;
                let headers = self.headers.decode(b)?;
                if kind == SYN_REPLY {
                    Frame::SynReply {
                        stream_id,
                        flags,
                        headers,
                    }
                } else {
                    Frame::Headers {
                        stream_id,
                        flags,
                        headers,
                    }
                }
            }
            RST_STREAM => {
                need(8, "RST_STREAM")?;
                Frame::RstStream {
                    stream_id: b.get_u32() & 0x7fff_ffff,
                    status: b.get_u32(),
                }
            }
            SETTINGS => Frame::Settings,
            PING => {
                need(4, "PING")?;
                Frame::Ping(b.get_u32())
            }
            GOAWAY => {
                need(8, "GOAWAY")?;
                Frame::GoAway {
                    last_stream_id: b.get_u32() & 0x7fff_ffff,
                    status: b.get_u32(),
                }
            }
            WINDOW_UPDATE => {
                need(8, "WINDOW_UPDATE")?;
                Frame::WindowUpdate {
                    stream_id: b.get_u32() & 0x7fff_ffff,
                    delta: b.get_u32() & 0x7fff_ffff,
                }
            }
            other => Frame::Unknown(other),
        })
    }
}

/// A stream the client opened.
pub struct Stream {
    pub id: u32,
    pub headers: Vec<(String, String)>,
    /// DATA from the client; ends at its FIN or RST_STREAM.
    pub data: mpsc::Receiver<Bytes>,
    pub out: StreamWriter,
}

impl Stream {
    /// A header's value (names compare case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Writes to one stream.
#[derive(Clone)]
pub struct StreamWriter {
    id: u32,
    tx: mpsc::Sender<Frame>,
}

impl StreamWriter {
    /// Sends `data` (split into frames); false once the session is gone.
    pub async fn write(&self, data: &[u8]) -> bool {
        for chunk in data.chunks(MAX_DATA) {
            let frame = Frame::Data {
                stream_id: self.id,
                flags: 0,
                data: Bytes::copy_from_slice(chunk),
            };
            if self.tx.send(frame).await.is_err() {
                return false;
            }
        }
        true
    }

    /// Half-closes the stream (an empty DATA frame with FIN).
    pub async fn close(&self) {
        let _ = self
            .tx
            .send(Frame::Data {
                stream_id: self.id,
                flags: FLAG_FIN,
                data: Bytes::new(),
            })
            .await;
    }

    /// Aborts the stream.
    pub async fn reset(&self, status: u32) {
        let _ = self
            .tx
            .send(Frame::RstStream {
                stream_id: self.id,
                status,
            })
            .await;
    }
}

/// The server side of a SPDY connection: accepts the streams the client opens.
pub struct Session {
    streams: mpsc::Receiver<Stream>,
    tx: mpsc::Sender<Frame>,
}

impl Session {
    /// Starts reading and writing `io`; both tasks end when the peer closes, on a protocol
    /// error, or when `cancel` fires.
    pub fn start<T>(io: T, cancel: CancellationToken) -> Self
    where
        T: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (mut rd, mut wr) = tokio::io::split(io);
        let (tx, mut rx) = mpsc::channel::<Frame>(64);
        let (streams_tx, streams) = mpsc::channel::<Stream>(16);
        let wcancel = cancel.clone();
        tokio::spawn(async move {
            let mut writer = FrameWriter::new();
            loop {
                let frame = tokio::select! {
                    () = wcancel.cancelled() => break,
                    f = rx.recv() => match f { Some(f) => f, None => break },
                };
                let bytes = match writer.encode(&frame) {
                    Ok(b) => b,
                    Err(e) => {
                        tracing::debug!(error = %e, "spdy: cannot encode a frame");
                        break;
                    }
                };
                if wr.write_all(&bytes).await.is_err() || wr.flush().await.is_err() {
                    break;
                }
                if matches!(frame, Frame::GoAway { .. }) {
                    break;
                }
            }
            let _ = wr.shutdown().await;
        });
        let rtx = tx.clone();
        tokio::spawn(async move {
            let mut reader = FrameReader::new();
            let mut open: HashMap<u32, mpsc::Sender<Bytes>> = HashMap::new();
            let mut last_id = 0u32;
            loop {
                let frame = tokio::select! {
                    () = cancel.cancelled() => break,
                    f = reader.read(&mut rd) => f,
                };
                let frame = match frame {
                    Ok(Some(f)) => f,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(error = %e, "spdy: session ended");
                        break;
                    }
                };
                match frame {
                    Frame::SynStream {
                        stream_id,
                        flags,
                        headers,
                        ..
                    } => {
                        if stream_id == 0 || stream_id <= last_id || open.contains_key(&stream_id) {
                            let _ = rtx
                                .send(Frame::RstStream {
                                    stream_id,
                                    status: RST_PROTOCOL_ERROR,
                                })
                                .await;
                            continue;
                        }
                        last_id = stream_id;
                        let (dtx, drx) = mpsc::channel(64);
                        if flags & FLAG_FIN == 0 {
                            open.insert(stream_id, dtx);
                        }
                        let _ = rtx
                            .send(Frame::SynReply {
                                stream_id,
                                flags: 0,
                                headers: Vec::new(),
                            })
                            .await;
                        let stream = Stream {
                            id: stream_id,
                            headers,
                            data: drx,
                            out: StreamWriter {
                                id: stream_id,
                                tx: rtx.clone(),
                            },
                        };
                        if streams_tx.send(stream).await.is_err() {
                            break;
                        }
                    }
                    Frame::Data {
                        stream_id,
                        flags,
                        data,
                    } => {
                        if let Some(dtx) = open.get(&stream_id)
                            && !data.is_empty()
                            && dtx.send(data).await.is_err()
                        {
                            // The handler is done with this stream; drop what else comes.
                            open.remove(&stream_id);
                        }
                        if flags & FLAG_FIN != 0 {
                            open.remove(&stream_id);
                        }
                    }
                    Frame::RstStream { stream_id, .. } => {
                        open.remove(&stream_id);
                    }
                    Frame::Ping(id) => {
                        let _ = rtx.send(Frame::Ping(id)).await;
                    }
                    Frame::GoAway { .. } => break,
                    Frame::SynReply { .. }
                    | Frame::Headers { .. }
                    | Frame::Settings
                    | Frame::WindowUpdate { .. }
                    | Frame::Unknown(_) => {}
                }
            }
        });
        Self { streams, tx }
    }

    /// The next stream the client opens; `None` once the connection is gone.
    pub async fn accept(&mut self) -> Option<Stream> {
        self.streams.recv().await
    }

    /// Ends the session: a GOAWAY, then the writer closes the connection once every frame
    /// queued before has gone out.
    pub async fn close(self) {
        let _ = self
            .tx
            .send(Frame::GoAway {
                last_stream_id: 0,
                status: 0,
            })
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn dictionary_is_the_spdy3_one() {
        let d = dictionary();
        assert_eq!(d.len(), 1423);
        assert_eq!(&d[..11], b"\0\0\0\x07options");
        assert!(d.ends_with(b",*,enq=0."));
        // zlib's dictionary id for it (the DICTID a SPDY/3 peer's first header block carries).
        let mut a: u32 = 1;
        let mut b: u32 = 0;
        for &x in d {
            a = (a + x as u32) % 65521;
            b = (b + a) % 65521;
        }
        let id = (b << 16) | a;
        let mut enc = HeaderEncoder::new();
        let block = enc.encode(&h(&[("a", "b")])).unwrap();
        assert_eq!(block[1] & 0x20, 0x20, "FDICT set");
        assert_eq!(
            u32::from_be_bytes([block[2], block[3], block[4], block[5]]),
            id
        );
    }

    #[test]
    fn header_blocks_round_trip_on_one_zlib_stream() {
        let mut enc = HeaderEncoder::new();
        let mut dec = HeaderDecoder::new();
        for i in 0..20 {
            let headers = h(&[
                ("streamType", "data"),
                ("port", &format!("{}", 8000 + i)),
                ("requestID", &i.to_string()),
            ]);
            let block = enc.encode(&headers).unwrap();
            let got = dec.decode(&block).unwrap();
            assert_eq!(
                got,
                h(&[
                    ("streamtype", "data"),
                    ("port", &format!("{}", 8000 + i)),
                    ("requestid", &i.to_string()),
                ])
            );
        }
        // A large block (bigger than the first output buffer) too.
        let big = "x".repeat(100_000);
        let block = enc.encode(&h(&[("big", &big)])).unwrap();
        assert_eq!(dec.decode(&block).unwrap(), h(&[("big", &big)]));
    }

    #[test]
    fn empty_header_block_is_valid() {
        let mut enc = HeaderEncoder::new();
        let mut dec = HeaderDecoder::new();
        let block = enc.encode(&[]).unwrap();
        assert!(dec.decode(&block).unwrap().is_empty());
    }

    #[test]
    fn corrupt_header_block_is_an_error() {
        let mut dec = HeaderDecoder::new();
        assert!(
            dec.decode(&[0x78, 0xbb, 0xff, 0xff, 0xff, 0xff, 1, 2, 3])
                .is_err()
        );
        let mut dec = HeaderDecoder::new();
        assert!(dec.decode(b"not zlib at all").is_err());
    }

    #[test]
    fn frames_have_the_spdy3_layout() {
        let mut w = FrameWriter::new();
        let ping = w.encode(&Frame::Ping(7)).unwrap();
        assert_eq!(&ping[..], &[0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0, 0, 7]);
        let data = w
            .encode(&Frame::Data {
                stream_id: 5,
                flags: FLAG_FIN,
                data: Bytes::from_static(b"hi"),
            })
            .unwrap();
        assert_eq!(&data[..], &[0, 0, 0, 5, 1, 0, 0, 2, b'h', b'i']);
        let rst = w
            .encode(&Frame::RstStream {
                stream_id: 3,
                status: RST_CANCEL,
            })
            .unwrap();
        assert_eq!(
            &rst[..],
            &[0x80, 3, 0, 3, 0, 0, 0, 8, 0, 0, 0, 3, 0, 0, 0, 5]
        );
        let goaway = w
            .encode(&Frame::GoAway {
                last_stream_id: 9,
                status: 0,
            })
            .unwrap();
        assert_eq!(
            &goaway[..],
            &[0x80, 3, 0, 7, 0, 0, 0, 8, 0, 0, 0, 9, 0, 0, 0, 0]
        );
    }

    #[tokio::test]
    async fn frames_round_trip() {
        let frames = vec![
            Frame::SynStream {
                stream_id: 1,
                associated_to: 0,
                priority: 0,
                flags: 0,
                headers: h(&[("streamtype", "error")]),
            },
            Frame::SynReply {
                stream_id: 1,
                flags: 0,
                headers: vec![],
            },
            Frame::Data {
                stream_id: 1,
                flags: 0,
                data: Bytes::from(vec![7u8; 70_000]),
            },
            Frame::Headers {
                stream_id: 3,
                flags: FLAG_FIN,
                headers: h(&[("a", "1\x002")]),
            },
            Frame::WindowUpdate {
                stream_id: 1,
                delta: 65536,
            },
            Frame::RstStream {
                stream_id: 1,
                status: RST_CANCEL,
            },
            Frame::Ping(2),
            Frame::GoAway {
                last_stream_id: 3,
                status: 0,
            },
        ];
        let mut w = FrameWriter::new();
        let mut bytes = Vec::new();
        for f in &frames {
            bytes.extend_from_slice(&w.encode(f).unwrap());
        }
        let mut r = FrameReader::new();
        let mut input = &bytes[..];
        for f in &frames {
            assert_eq!(r.read(&mut input).await.unwrap().as_ref(), Some(f));
        }
        assert!(r.read(&mut input).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn wrong_version_and_oversized_frames_are_refused() {
        let mut r = FrameReader::new();
        let mut input: &[u8] = &[0x80, 2, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1];
        assert!(matches!(
            r.read(&mut input).await,
            Err(SpdyError::Version(2))
        ));
        let mut input: &[u8] = &[0x80, 3, 0, 3, 0, 0, 0, 2, 0, 0];
        assert!(matches!(
            r.read(&mut input).await,
            Err(SpdyError::Malformed("RST_STREAM"))
        ));
    }

    /// A client's side of a session, for tests: writes frames, reads the answers.
    pub(crate) struct TestClient<T> {
        pub io: T,
        pub w: FrameWriter,
        pub r: FrameReader,
    }

    impl<T: AsyncRead + AsyncWrite + Unpin> TestClient<T> {
        pub fn new(io: T) -> Self {
            Self {
                io,
                w: FrameWriter::new(),
                r: FrameReader::new(),
            }
        }
        pub async fn send(&mut self, f: Frame) {
            let b = self.w.encode(&f).unwrap();
            self.io.write_all(&b).await.unwrap();
        }
        pub async fn recv(&mut self) -> Option<Frame> {
            self.r.read(&mut self.io).await.unwrap()
        }
    }

    #[tokio::test]
    async fn session_replies_pings_and_carries_data() {
        let (a, b) = tokio::io::duplex(1 << 20);
        let mut session = Session::start(b, CancellationToken::new());
        let mut c = TestClient::new(a);
        c.send(Frame::Ping(1)).await;
        assert_eq!(c.recv().await, Some(Frame::Ping(1)));
        c.send(Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            flags: 0,
            headers: h(&[("streamType", "stdin")]),
        })
        .await;
        let mut s = session.accept().await.unwrap();
        assert_eq!(s.header("STREAMTYPE"), Some("stdin"));
        assert!(matches!(
            c.recv().await,
            Some(Frame::SynReply { stream_id: 1, .. })
        ));
        c.send(Frame::Data {
            stream_id: 1,
            flags: FLAG_FIN,
            data: Bytes::from_static(b"abc"),
        })
        .await;
        assert_eq!(s.data.recv().await.as_deref(), Some(&b"abc"[..]));
        assert_eq!(s.data.recv().await, None);
        s.out.write(b"out").await;
        s.out.close().await;
        assert!(
            matches!(c.recv().await, Some(Frame::Data { stream_id: 1, flags: 0, ref data }) if &data[..] == b"out")
        );
        assert!(matches!(
            c.recv().await,
            Some(Frame::Data {
                stream_id: 1,
                flags: FLAG_FIN,
                ..
            })
        ));
        // A stream id that does not increase is refused.
        c.send(Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            flags: 0,
            headers: vec![],
        })
        .await;
        assert!(matches!(
            c.recv().await,
            Some(Frame::RstStream {
                stream_id: 1,
                status: RST_PROTOCOL_ERROR
            })
        ));
        session.close().await;
        assert!(matches!(c.recv().await, Some(Frame::GoAway { .. })));
        assert_eq!(c.recv().await, None);
    }
}
