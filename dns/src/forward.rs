//! Names outside the cluster: asked of the host's resolvers, answers cached.
//!
//! Each question goes to the upstreams in order (UDP from a fresh socket, so a new random
//! source port and query ID per question; over TCP when the answer comes back truncated)
//! until one answers with something other than SERVFAIL/REFUSED. Answers are cached per
//! (name, type, class) for their smallest TTL (at most [`MAX_TTL`]); negative answers for
//! their SOA's minimum (at most [`MAX_NEGATIVE_TTL`]); failures are not cached. A cached
//! answer is served with its TTLs counted down. Why each upstream failed is an
//! [`AskError`]; [`ForwardError::Failed`] lists them all.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::num::TryFromIntError;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use hickory_proto::ProtoError;
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RData, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// Longest time a positive answer is kept.
pub const MAX_TTL: u32 = 3600;
/// Longest time a negative answer is kept.
pub const MAX_NEGATIVE_TTL: u32 = 300;
/// Negative answers without an SOA are kept this long.
const DEFAULT_NEGATIVE_TTL: u32 = 30;

#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("no upstream resolver is configured")]
    NoUpstream,
    /// Every upstream failed, each for its reason (in the order they were asked).
    #[error("no upstream resolver answered ({})", failures(.0))]
    Failed(Vec<(SocketAddr, AskError)>),
}

fn failures(errors: &[(SocketAddr, AskError)]) -> String {
    let parts: Vec<String> = errors.iter().map(|(up, e)| format!("{up}: {e}")).collect();
    parts.join("; ")
}

/// Why one upstream gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// The question cannot be encoded.
    #[error(transparent)]
    Encode(ProtoError),
    #[error("timed out")]
    Timeout,
    #[error("timed out over TCP")]
    TcpTimeout,
    /// Sending or receiving failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The question is too long for a TCP frame.
    #[error(transparent)]
    TooLong(#[from] TryFromIntError),
    #[error("bad answer: {0}")]
    BadAnswer(#[source] ProtoError),
    /// The answer's ID or question differs from ours.
    #[error("an answer to another question")]
    Mismatch,
    /// The upstream answered SERVFAIL or REFUSED.
    #[error("{0}")]
    Code(ResponseCode),
}

type CacheKey = (Name, RecordType, DNSClass);

struct Entry {
    message: Message,
    stored: Instant,
    ttl: u32,
}

/// The forwarder and its cache.
pub struct Forwarder {
    upstreams: Vec<SocketAddr>,
    timeout: Duration,
    capacity: usize,
    cache: Mutex<HashMap<CacheKey, Entry>>,
}

impl Forwarder {
    /// Forwards to `upstreams` (port included), waiting `timeout` for each, caching up to
    /// `capacity` answers.
    pub fn new(upstreams: Vec<SocketAddr>, timeout: Duration, capacity: usize) -> Self {
        Self {
            upstreams,
            timeout,
            capacity,
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub fn upstreams(&self) -> &[SocketAddr] {
        &self.upstreams
    }

    /// Cached answers (for metrics).
    pub fn cached(&self) -> usize {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// A cached, unexpired answer to `query`, TTLs counted down.
    pub fn lookup(&self, query: &Query) -> Option<Message> {
        let key = key(query);
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = cache.get(&key)?;
        let age = u32::try_from(entry.stored.elapsed().as_secs()).unwrap_or(u32::MAX);
        if age >= entry.ttl {
            cache.remove(&key);
            return None;
        }
        let mut m = entry.message.clone();
        drop(cache);
        let count_down = |rs: &mut Vec<hickory_proto::rr::Record>| {
            for r in rs {
                r.set_ttl(r.ttl().saturating_sub(age));
            }
        };
        count_down(m.answers_mut());
        count_down(m.name_servers_mut());
        count_down(m.additionals_mut());
        Some(m)
    }

    /// Asks the upstreams (no cache lookup: see [`Forwarder::lookup`]) and caches the answer.
    pub async fn resolve(&self, query: &Query) -> Result<Message, ForwardError> {
        if self.upstreams.is_empty() {
            return Err(ForwardError::NoUpstream);
        }
        let mut errors = Vec::new();
        for up in &self.upstreams {
            match self.ask(*up, query).await {
                Ok(m)
                    if !matches!(
                        m.response_code(),
                        ResponseCode::ServFail | ResponseCode::Refused
                    ) =>
                {
                    self.store(query, &m);
                    return Ok(m);
                }
                Ok(m) => errors.push((*up, AskError::Code(m.response_code()))),
                Err(e) => errors.push((*up, e)),
            }
        }
        Err(ForwardError::Failed(errors))
    }

    fn store(&self, query: &Query, m: &Message) {
        let Some(ttl) = cache_ttl(m) else { return };
        if ttl == 0 {
            return;
        }
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= self.capacity {
            cache.retain(|_, e| e.stored.elapsed().as_secs() < u64::from(e.ttl));
            // Still full: drop an arbitrary tenth rather than grow.
            if cache.len() >= self.capacity {
                let drop: Vec<CacheKey> =
                    cache.keys().take(self.capacity / 10 + 1).cloned().collect();
                for k in drop {
                    cache.remove(&k);
                }
            }
        }
        cache.insert(
            key(query),
            Entry {
                message: m.clone(),
                stored: Instant::now(),
                ttl,
            },
        );
    }

    /// One question to one upstream.
    async fn ask(&self, upstream: SocketAddr, query: &Query) -> Result<Message, AskError> {
        let id: u16 = rand::random();
        let mut m = Message::new();
        m.set_id(id)
            .set_message_type(MessageType::Query)
            .set_op_code(OpCode::Query)
            .set_recursion_desired(true)
            .add_query(query.clone());
        let mut edns = Edns::new();
        edns.set_max_payload(1232);
        m.set_edns(edns);
        let bytes = m.to_vec().map_err(AskError::Encode)?;
        let answer = tokio::time::timeout(self.timeout, udp(upstream, &bytes))
            .await
            .map_err(|_| AskError::Timeout)??;
        let answer = check(answer, id, query)?;
        if !answer.truncated() {
            return Ok(answer);
        }
        let answer = tokio::time::timeout(self.timeout, tcp(upstream, &bytes))
            .await
            .map_err(|_| AskError::TcpTimeout)??;
        check(answer, id, query)
    }
}

fn key(q: &Query) -> CacheKey {
    (q.name().to_lowercase(), q.query_type(), q.query_class())
}

/// How long an answer may be cached: `None` for failures.
fn cache_ttl(m: &Message) -> Option<u32> {
    match m.response_code() {
        ResponseCode::NoError if !m.answers().is_empty() => {
            let min = m.answers().iter().map(|r| r.ttl()).min().unwrap_or(0);
            Some(min.min(MAX_TTL))
        }
        ResponseCode::NoError | ResponseCode::NXDomain => {
            let soa = m.name_servers().iter().find_map(|r| match r.data() {
                RData::SOA(s) => Some(r.ttl().min(s.minimum())),
                _ => None,
            });
            Some(soa.unwrap_or(DEFAULT_NEGATIVE_TTL).min(MAX_NEGATIVE_TTL))
        }
        _ => None,
    }
}

/// The answer must match the question (ID and name, type, class), or it is not ours.
fn check(bytes: Vec<u8>, id: u16, query: &Query) -> Result<Message, AskError> {
    let m = Message::from_vec(&bytes).map_err(AskError::BadAnswer)?;
    let same = m.id() == id
        && m.message_type() == MessageType::Response
        && m.queries().first().is_some_and(|q| key(q) == key(query));
    if !same {
        return Err(AskError::Mismatch);
    }
    Ok(m)
}

async fn udp(upstream: SocketAddr, bytes: &[u8]) -> Result<Vec<u8>, AskError> {
    let local: SocketAddr = if upstream.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = UdpSocket::bind(local).await?;
    sock.connect(upstream).await?;
    sock.send(bytes).await?;
    let mut buf = vec![0u8; 4096];
    let n = sock.recv(&mut buf).await?;
    buf.truncate(n);
    Ok(buf)
}

async fn tcp(upstream: SocketAddr, bytes: &[u8]) -> Result<Vec<u8>, AskError> {
    let mut s = TcpStream::connect(upstream).await?;
    let len = u16::try_from(bytes.len())?;
    let mut framed = len.to_be_bytes().to_vec();
    framed.extend_from_slice(bytes);
    s.write_all(&framed).await?;
    let n = s.read_u16().await?;
    let mut buf = vec![0u8; usize::from(n)];
    s.read_exact(&mut buf).await?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::Record;
    use hickory_proto::rr::rdata::{A, SOA};
    use std::str::FromStr;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A UDP resolver on loopback that answers every A question with 192.0.2.1 (TTL 60),
    /// NXDOMAIN with an SOA (minimum 10) for names starting with `nx`, and counts questions.
    async fn upstream() -> (SocketAddr, Arc<AtomicUsize>) {
        let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = sock.local_addr().unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 512];
            loop {
                let (n, from) = sock.recv_from(&mut buf).await.unwrap();
                c.fetch_add(1, Ordering::SeqCst);
                let q = Message::from_vec(&buf[..n]).unwrap();
                let mut r = Message::new();
                r.set_id(q.id())
                    .set_message_type(MessageType::Response)
                    .add_queries(q.queries().to_vec());
                let name = q.queries()[0].name().clone();
                if name.to_ascii().starts_with("nx") {
                    r.set_response_code(ResponseCode::NXDomain);
                    let soa = SOA::new(Name::root(), Name::root(), 1, 1, 1, 1, 10);
                    r.add_name_server(Record::from_rdata(Name::root(), 100, RData::SOA(soa)));
                } else {
                    r.add_answer(Record::from_rdata(name, 60, RData::A(A::new(192, 0, 2, 1))));
                }
                sock.send_to(&r.to_vec().unwrap(), from).await.unwrap();
            }
        });
        (addr, count)
    }

    fn q(name: &str) -> Query {
        Query::query(Name::from_str(name).unwrap(), RecordType::A)
    }

    #[tokio::test]
    async fn forwards_and_caches_positive_and_negative_answers() {
        let (up, count) = upstream().await;
        let f = Forwarder::new(vec![up], Duration::from_secs(2), 100);
        assert!(f.lookup(&q("example.org.")).is_none());
        let m = f.resolve(&q("example.org.")).await.unwrap();
        assert_eq!(m.answers()[0].data().to_string(), "192.0.2.1");
        let cached = f
            .lookup(&q("EXAMPLE.org."))
            .expect("cached, case-insensitively");
        assert_eq!(cached.answers()[0].ttl(), 60);
        let m = f.resolve(&q("nx.example.org.")).await.unwrap();
        assert_eq!(m.response_code(), ResponseCode::NXDomain);
        assert!(f.lookup(&q("nx.example.org.")).is_some());
        assert_eq!(count.load(Ordering::SeqCst), 2);
        assert_eq!(f.cached(), 2);
        assert_eq!(cache_ttl(&m), Some(10), "the SOA minimum");
    }

    #[tokio::test]
    async fn a_dead_upstream_is_skipped_and_no_upstream_is_an_error() {
        let (up, _) = upstream().await;
        // Nothing listens on this port: the first upstream fails (refused or timeout).
        let dead = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let f = Forwarder::new(vec![dead, up], Duration::from_millis(300), 100);
        let m = f.resolve(&q("example.org.")).await.unwrap();
        assert_eq!(m.answers().len(), 1);
        let f = Forwarder::new(vec![], Duration::from_secs(1), 100);
        assert!(matches!(
            f.resolve(&q("example.org.")).await,
            Err(ForwardError::NoUpstream)
        ));
    }

    #[test]
    fn error_text() {
        let up: SocketAddr = "192.0.2.53:53".parse().unwrap();
        let other: SocketAddr = "[2001:db8::1]:53".parse().unwrap();
        let e = ForwardError::Failed(vec![
            (up, AskError::Timeout),
            (other, AskError::Code(ResponseCode::ServFail)),
        ]);
        assert_eq!(
            e.to_string(),
            format!(
                "no upstream resolver answered (192.0.2.53:53: timed out; [2001:db8::1]:53: {})",
                ResponseCode::ServFail
            )
        );
        assert_eq!(AskError::TcpTimeout.to_string(), "timed out over TCP");
        assert_eq!(
            AskError::Mismatch.to_string(),
            "an answer to another question"
        );
        let bad = check(vec![1, 2, 3], 1, &q("example.org.")).unwrap_err();
        let proto = Message::from_vec(&[1, 2, 3]).unwrap_err();
        assert!(matches!(bad, AskError::BadAnswer(_)));
        assert_eq!(bad.to_string(), format!("bad answer: {proto}"));
        let mut m = Message::new();
        m.set_id(7)
            .set_message_type(MessageType::Response)
            .add_query(q("example.org."));
        let bytes = m.to_vec().unwrap();
        assert!(matches!(
            check(bytes.clone(), 8, &q("example.org.")),
            Err(AskError::Mismatch)
        ));
        assert!(check(bytes, 7, &q("example.org.")).is_ok());
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let text = io.to_string();
        assert_eq!(AskError::from(io).to_string(), text);
    }

    #[tokio::test]
    async fn the_cache_stays_within_its_capacity() {
        let (up, _) = upstream().await;
        let f = Forwarder::new(vec![up], Duration::from_secs(2), 10);
        for i in 0..25 {
            f.resolve(&q(&format!("n{i}.example.org."))).await.unwrap();
        }
        assert!(f.cached() <= 10, "{}", f.cached());
    }
}
