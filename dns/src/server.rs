//! The DNS wire: queries in, answers out, over UDP and TCP.
//!
//! [`Handler`] turns one query message into one answer: cluster names from the [`Index`]
//! (SERVFAIL until the informers have synced, so that resolvers retry rather than cache a
//! false NXDOMAIN), other names from the [`Forwarder`]. Answers that need no upstream are
//! made on the receiving task; forwarded ones on a tracked task each.
//!
//! UDP answers fit the client's limit: 512 bytes, or the EDNS payload size it advertised (at
//! most 4096); a larger answer is sent empty with the TC bit, and the client asks again over
//! TCP (RFC 1035 §4.2.1, RFC 6891). TCP connections carry length-prefixed messages, several
//! per connection, and are closed after [`TCP_IDLE`] without a query.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Record, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::answer::{self, Local, Outcome, Zone};
use crate::forward::Forwarder;
use crate::index::Index;
use crate::metrics::Metrics;
use crate::packet_cache::{self, PacketCache};
use crate::transport::Proto;

/// How long a TCP connection may stay without a query.
pub const TCP_IDLE: Duration = Duration::from_secs(10);
/// The EDNS payload size this server advertises.
const EDNS_PAYLOAD: u16 = 1232;

/// Answers queries.
pub struct Handler {
    pub index: Arc<RwLock<Index>>,
    /// Whether the informers have synced (cluster names are answered only then).
    pub synced: Arc<AtomicBool>,
    pub zone: Zone,
    pub forwarder: Forwarder,
    pub metrics: Arc<Metrics>,
    pub packets: PacketCache,
}

/// What to do with a packet.
enum Step {
    /// Answer this (encoded for the transport).
    Reply(Vec<u8>),
    /// Needs an upstream: finish with [`Handler::finish`].
    Upstream(Box<Message>),
    /// Not a DNS message worth an answer.
    Drop,
}

impl Handler {
    /// Answers `packet` completely (used by TCP, and by UDP for what needs an upstream).
    pub async fn handle(&self, packet: &[u8], proto: Proto) -> Option<Vec<u8>> {
        match self.start(packet, proto) {
            Step::Reply(b) => Some(b),
            Step::Upstream(req) => Some(self.finish(&req, proto).await),
            Step::Drop => None,
        }
    }

    /// Everything that needs no upstream: parse, check, answer from the index or the
    /// caches.
    fn start(&self, packet: &[u8], proto: Proto) -> Step {
        self.metrics.request(proto);
        let synced = self.synced.load(Ordering::Acquire);
        let generation = self
            .index
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .generation();
        if synced && let Some((answer, rcode)) = self.packets.get(packet, proto, generation) {
            self.metrics.response(rcode);
            return Step::Reply(answer);
        }
        let (step, max_age) = self.start_uncached(packet, proto, synced);
        if let (Step::Reply(answer), Some((age, rcode))) = (&step, max_age) {
            self.packets
                .put(packet, proto, generation, age, rcode, answer);
        }
        step
    }

    /// [`Handler::start`] without the packet cache: the step, and for an answer that may be
    /// reused, for how long and its response code.
    fn start_uncached(
        &self,
        packet: &[u8],
        proto: Proto,
        synced: bool,
    ) -> (Step, Option<(Duration, ResponseCode)>) {
        let req = match Message::from_vec(packet) {
            Ok(m) => m,
            Err(_) => {
                // FORMERR when at least the header is there to answer to.
                if packet.len() < 12 {
                    return (Step::Drop, None);
                }
                let id = u16::from_be_bytes([packet[0], packet[1]]);
                let m = Message::error_msg(id, OpCode::Query, ResponseCode::FormErr);
                return (self.reply(&m, None, proto), None);
            }
        };
        if req.message_type() != MessageType::Query {
            return (Step::Drop, None);
        }
        if req.op_code() != OpCode::Query {
            let m = Message::error_msg(req.id(), req.op_code(), ResponseCode::NotImp);
            return (self.reply(&m, Some(&req), proto), None);
        }
        let [q] = req.queries() else {
            let m = Message::error_msg(req.id(), OpCode::Query, ResponseCode::FormErr);
            return (self.reply(&m, Some(&req), proto), None);
        };
        if q.query_class() == DNSClass::IN {
            let outcome = {
                let index = self.index.read().unwrap_or_else(PoisonError::into_inner);
                answer::answer(&index, &self.zone, q.name(), q.query_type())
            };
            match outcome {
                Outcome::Local(_) if !synced => {
                    let m = response(&req, ResponseCode::ServFail);
                    return (self.reply(&m, Some(&req), proto), None);
                }
                Outcome::Local(l) if l.chase.is_none() => {
                    let m = local_message(&req, l);
                    let reuse = (packet_cache::CLUSTER_AGE, m.response_code());
                    return (self.reply(&m, Some(&req), proto), Some(reuse));
                }
                Outcome::Local(_) => return (Step::Upstream(Box::new(req)), None),
                Outcome::Forward => {}
            }
        }
        match self.forwarder.lookup(q) {
            Some(cached) => {
                self.metrics.cache(true);
                let m = forwarded_message(&req, cached);
                let reuse = (packet_cache::FORWARDED_AGE, m.response_code());
                (self.reply(&m, Some(&req), proto), Some(reuse))
            }
            None => (Step::Upstream(Box::new(req)), None),
        }
    }

    /// The answer that needs an upstream: a forwarded name, or an ExternalName's target.
    async fn finish(&self, req: &Message, proto: Proto) -> Vec<u8> {
        let q = &req.queries()[0];
        let outcome = {
            let index = self.index.read().unwrap_or_else(PoisonError::into_inner);
            answer::answer(&index, &self.zone, q.name(), q.query_type())
        };
        let m = match outcome {
            Outcome::Local(mut l) => {
                if let Some(target) = l.chase.take() {
                    let tq = Query::query(target, q.query_type());
                    let extra = self.resolve_target(&tq).await;
                    l.answers.extend(extra);
                }
                local_message(req, l)
            }
            Outcome::Forward => match self.forward(q).await {
                Some(answer) => forwarded_message(req, answer),
                None => response(req, ResponseCode::ServFail),
            },
        };
        match self.reply(&m, Some(req), proto) {
            Step::Reply(b) => b,
            _ => Vec::new(),
        }
    }

    /// The target of a CNAME: from the cluster zone, the cache, or an upstream.
    async fn resolve_target(&self, q: &Query) -> Vec<Record> {
        let local = {
            let index = self.index.read().unwrap_or_else(PoisonError::into_inner);
            answer::answer(&index, &self.zone, q.name(), q.query_type())
        };
        match local {
            // One level: a CNAME to a cluster name that is itself an ExternalName is left
            // to the client.
            Outcome::Local(l) => l.answers,
            Outcome::Forward => self
                .forward(q)
                .await
                .map(|mut m| m.take_answers())
                .unwrap_or_default(),
        }
    }

    async fn forward(&self, q: &Query) -> Option<Message> {
        if let Some(m) = self.forwarder.lookup(q) {
            self.metrics.cache(true);
            return Some(m);
        }
        self.metrics.cache(false);
        match self.forwarder.resolve(q).await {
            Ok(m) => Some(m),
            Err(e) => {
                self.metrics.forward_failed();
                tracing::debug!(name = %q.name(), error = %e, "forwarding failed");
                None
            }
        }
    }

    /// Encodes `m` for the transport, truncated to what a UDP client accepts.
    fn reply(&self, m: &Message, req: Option<&Message>, proto: Proto) -> Step {
        self.metrics.response(m.response_code());
        let Ok(bytes) = m.to_vec() else {
            return Step::Drop;
        };
        let limit = match (proto, req.and_then(|r| r.extensions().as_ref())) {
            (Proto::Tcp, _) => usize::from(u16::MAX),
            (Proto::Udp, Some(edns)) => usize::from(edns.max_payload().clamp(512, 4096)),
            (Proto::Udp, None) => 512,
        };
        if bytes.len() <= limit {
            return Step::Reply(bytes);
        }
        self.metrics.truncated();
        let mut t = m.truncate();
        t.set_truncated(true);
        match t.to_vec() {
            Ok(b) => Step::Reply(b),
            Err(_) => Step::Drop,
        }
    }
}

/// A response header for `req`.
fn response(req: &Message, rcode: ResponseCode) -> Message {
    let mut m = Message::new();
    m.set_id(req.id())
        .set_message_type(MessageType::Response)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(req.recursion_desired())
        .set_recursion_available(true)
        .set_response_code(rcode)
        .add_queries(req.queries().to_vec());
    if req.extensions().is_some() {
        let mut edns = Edns::new();
        edns.set_max_payload(EDNS_PAYLOAD);
        m.set_edns(edns);
    }
    m
}

fn local_message(req: &Message, l: Local) -> Message {
    let mut m = response(req, l.rcode);
    m.set_authoritative(true);
    m.insert_answers(l.answers);
    m.insert_name_servers(l.authority);
    for r in l.additionals {
        m.add_additional(r);
    }
    m
}

/// An upstream's (or the cache's) answer, re-addressed to the client's query.
fn forwarded_message(req: &Message, mut answer: Message) -> Message {
    let mut m = response(req, answer.response_code());
    m.set_authentic_data(answer.authentic_data());
    m.insert_answers(answer.take_answers());
    m.insert_name_servers(answer.take_name_servers());
    let additionals: Vec<Record> = answer
        .take_additionals()
        .into_iter()
        .filter(|r| r.record_type() != RecordType::OPT)
        .collect();
    m.insert_additionals(additionals);
    m
}

/// Serves UDP on `socket` until `cancel`: `workers` receiving tasks answer what needs no
/// upstream themselves and hand the rest to a tracked task each.
pub async fn serve_udp(
    socket: Arc<UdpSocket>,
    handler: Arc<Handler>,
    workers: usize,
    tasks: TaskTracker,
    cancel: CancellationToken,
) {
    let mut loops = Vec::new();
    for _ in 0..workers.max(1) {
        let (socket, handler, tasks, cancel) = (
            socket.clone(),
            handler.clone(),
            tasks.clone(),
            cancel.clone(),
        );
        loops.push(tasks.clone().spawn(async move {
            let mut buf = vec![0u8; 4096];
            loop {
                let (n, from) = tokio::select! {
                    () = cancel.cancelled() => return,
                    r = socket.recv_from(&mut buf) => match r {
                        Ok(x) => x,
                        Err(e) => {
                            tracing::debug!(error = %e, "DNS UDP receive");
                            continue;
                        }
                    },
                };
                match handler.start(&buf[..n], Proto::Udp) {
                    Step::Reply(b) => {
                        let _ = socket.send_to(&b, from).await;
                    }
                    Step::Upstream(req) => {
                        let (socket, handler) = (socket.clone(), handler.clone());
                        let cancel = cancel.clone();
                        tasks.spawn(async move {
                            tokio::select! {
                                () = cancel.cancelled() => {}
                                b = handler.finish(&req, Proto::Udp) => {
                                    let _ = socket.send_to(&b, from).await;
                                }
                            }
                        });
                    }
                    Step::Drop => {}
                }
            }
        }));
    }
    for l in loops {
        let _ = l.await;
    }
}

/// Serves TCP on `listener` until `cancel`, a tracked task per connection.
pub async fn serve_tcp(
    listener: TcpListener,
    handler: Arc<Handler>,
    tasks: TaskTracker,
    cancel: CancellationToken,
) {
    loop {
        let stream = tokio::select! {
            () = cancel.cancelled() => return,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::debug!(error = %e, "DNS TCP accept");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let (handler, cancel) = (handler.clone(), cancel.clone());
        tasks.spawn(async move {
            tokio::select! {
                () = cancel.cancelled() => {}
                () = connection(stream, &handler) => {}
            }
        });
    }
}

async fn connection(mut stream: TcpStream, handler: &Handler) {
    loop {
        let Ok(Ok(len)) = tokio::time::timeout(TCP_IDLE, stream.read_u16()).await else {
            return;
        };
        let mut buf = vec![0u8; usize::from(len)];
        if tokio::time::timeout(TCP_IDLE, stream.read_exact(&mut buf))
            .await
            .is_err()
        {
            return;
        }
        let Some(answer) = handler.handle(&buf, Proto::Tcp).await else {
            return;
        };
        let Ok(n) = u16::try_from(answer.len()) else {
            return;
        };
        let mut framed = n.to_be_bytes().to_vec();
        framed.extend_from_slice(&answer);
        if stream.write_all(&framed).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::tests::{slice, svc};
    use crate::transport::{bind_tcp, bind_udp};
    use hickory_proto::rr::Name;
    use serde_json::json;
    use std::str::FromStr;

    fn handler(synced: bool) -> Handler {
        let mut ix = Index::new("cluster.local");
        ix.apply_service(
            "default",
            "web",
            Some(&svc("default", "web", json!({"clusterIP": "10.43.0.5"}))),
        );
        ix.apply_service(
            "default",
            "big",
            Some(&svc("default", "big", json!({"clusterIP": "None"}))),
        );
        let eps: Vec<_> = (0..60)
            .map(|i| json!({"addresses": [format!("10.42.1.{i}")]}))
            .collect();
        ix.apply_slice(
            "default",
            "big-1",
            Some(&slice("default", "big-1", "big", json!({"endpoints": eps}))),
        );
        Handler {
            index: Arc::new(RwLock::new(ix)),
            synced: Arc::new(AtomicBool::new(synced)),
            zone: Zone {
                ttl: 5,
                dns_ip: None,
            },
            forwarder: Forwarder::new(Vec::new(), Duration::from_millis(100), 10),
            metrics: Arc::new(Metrics::default()),
            packets: PacketCache::new(100),
        }
    }

    fn query(name: &str, t: RecordType, edns: Option<u16>) -> Vec<u8> {
        let mut m = Message::new();
        m.set_id(4242)
            .set_recursion_desired(true)
            .add_query(Query::query(Name::from_str(name).unwrap(), t));
        if let Some(p) = edns {
            let mut e = Edns::new();
            e.set_max_payload(p);
            m.set_edns(e);
        }
        m.to_vec().unwrap()
    }

    async fn ask(h: &Handler, packet: &[u8], proto: Proto) -> Message {
        Message::from_vec(&h.handle(packet, proto).await.unwrap()).unwrap()
    }

    #[tokio::test]
    async fn answers_carry_the_query_id_and_flags() {
        let h = handler(true);
        let m = ask(
            &h,
            &query("web.default.svc.cluster.local.", RecordType::A, None),
            Proto::Udp,
        )
        .await;
        assert_eq!(m.id(), 4242);
        assert!(m.authoritative() && m.recursion_desired() && m.recursion_available());
        assert_eq!(m.answers()[0].data().to_string(), "10.43.0.5");
        let m = ask(
            &h,
            &query("nope.default.svc.cluster.local.", RecordType::A, None),
            Proto::Udp,
        )
        .await;
        assert_eq!(m.response_code(), ResponseCode::NXDomain);
        assert_eq!(m.name_servers().len(), 1);
    }

    #[tokio::test]
    async fn repeated_questions_reuse_the_answer_until_the_index_changes() {
        let h = handler(true);
        let q = query("web.default.svc.cluster.local.", RecordType::A, None);
        let first = ask(&h, &q, Proto::Udp).await;
        let mut again = q.clone();
        again[..2].copy_from_slice(&7u16.to_be_bytes());
        let second = ask(&h, &again, Proto::Udp).await;
        assert_eq!(second.id(), 7);
        assert_eq!(second.answers(), first.answers());
        h.index.write().unwrap().apply_service(
            "default",
            "web",
            Some(&svc("default", "web", json!({"clusterIP": "10.43.0.99"}))),
        );
        let third = ask(&h, &again, Proto::Udp).await;
        assert_eq!(third.answers()[0].data().to_string(), "10.43.0.99");
    }

    #[tokio::test]
    async fn large_udp_answers_are_truncated_and_whole_over_tcp() {
        let h = handler(true);
        let q = query("big.default.svc.cluster.local.", RecordType::A, None);
        let m = ask(&h, &q, Proto::Udp).await;
        assert!(m.truncated());
        assert!(m.answers().is_empty());
        let m = ask(&h, &q, Proto::Tcp).await;
        assert!(!m.truncated());
        assert_eq!(m.answers().len(), 60);
        // A client that advertises a large EDNS buffer gets it all over UDP.
        let q = query("big.default.svc.cluster.local.", RecordType::A, Some(4096));
        let m = ask(&h, &q, Proto::Udp).await;
        assert!(!m.truncated());
        assert_eq!(m.answers().len(), 60);
        assert!(m.extensions().is_some());
    }

    #[tokio::test]
    async fn before_sync_cluster_names_fail_and_bad_input_gets_an_error() {
        let h = handler(false);
        let m = ask(
            &h,
            &query("web.default.svc.cluster.local.", RecordType::A, None),
            Proto::Udp,
        )
        .await;
        assert_eq!(m.response_code(), ResponseCode::ServFail);
        // Garbage with a header: FORMERR to its ID; shorter than a header: no answer.
        let mut junk = vec![0x12, 0x34, 0, 0, 0, 5];
        junk.extend([0xff; 20]);
        let m = ask(&h, &junk, Proto::Udp).await;
        assert_eq!((m.id(), m.response_code()), (0x1234, ResponseCode::FormErr));
        assert!(h.handle(&[1, 2, 3], Proto::Udp).await.is_none());
        // No upstream: a name outside the cluster is SERVFAIL.
        let h = handler(true);
        let m = ask(&h, &query("example.org.", RecordType::A, None), Proto::Udp).await;
        assert_eq!(m.response_code(), ResponseCode::ServFail);
    }

    #[tokio::test]
    async fn serves_over_real_sockets() {
        let h = Arc::new(handler(true));
        let udp = Arc::new(bind_udp("127.0.0.1:0".parse().unwrap()).unwrap());
        let tcp = bind_tcp("127.0.0.1:0".parse().unwrap()).unwrap();
        let (ua, ta) = (udp.local_addr().unwrap(), tcp.local_addr().unwrap());
        let (tasks, cancel) = (TaskTracker::new(), CancellationToken::new());
        tasks.spawn(serve_udp(udp, h.clone(), 2, tasks.clone(), cancel.clone()));
        tasks.spawn(serve_tcp(tcp, h.clone(), tasks.clone(), cancel.clone()));

        let c = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        c.send_to(
            &query("web.default.svc.cluster.local.", RecordType::A, None),
            ua,
        )
        .await
        .unwrap();
        let mut buf = [0u8; 512];
        let n = c.recv(&mut buf).await.unwrap();
        assert_eq!(Message::from_vec(&buf[..n]).unwrap().answers().len(), 1);

        let mut s = TcpStream::connect(ta).await.unwrap();
        for _ in 0..2 {
            let q = query("big.default.svc.cluster.local.", RecordType::A, None);
            s.write_u16(q.len() as u16).await.unwrap();
            s.write_all(&q).await.unwrap();
            let n = s.read_u16().await.unwrap();
            let mut b = vec![0u8; n as usize];
            s.read_exact(&mut b).await.unwrap();
            assert_eq!(Message::from_vec(&b).unwrap().answers().len(), 60);
        }
        cancel.cancel();
        tasks.close();
        tasks.wait().await;
    }
}
