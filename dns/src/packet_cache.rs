//! Encoded answers by question: a request byte-identical to an earlier one (all but its ID:
//! flags, question with its letter case, EDNS record) over the same transport gets the same
//! answer, so the answer made then is sent again with the new ID, as PowerDNS's packet cache
//! does. Only answers made without an upstream are kept: cluster answers while the index is
//! unchanged (its generation) and at most [`CLUSTER_AGE`]; answers from the forwarder's cache
//! for [`FORWARDED_AGE`], so their TTLs are never more than that behind the count-down.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use hickory_proto::op::ResponseCode;

use crate::transport::Proto;

/// Longest reuse of a cluster answer (the SOA serial and negative answers move with time).
pub const CLUSTER_AGE: Duration = Duration::from_secs(5);
/// Longest reuse of an answer from the forwarder's cache.
pub const FORWARDED_AGE: Duration = Duration::from_secs(1);

struct Entry {
    generation: u64,
    made: Instant,
    max_age: Duration,
    rcode: ResponseCode,
    answer: Vec<u8>,
}

/// The cache; cleared when it reaches its capacity.
pub struct PacketCache {
    entries: Mutex<HashMap<Vec<u8>, Entry>>,
    capacity: usize,
}

fn key(packet: &[u8], proto: Proto) -> Option<Vec<u8>> {
    let rest = packet.get(2..)?;
    let mut k = Vec::with_capacity(rest.len() + 1);
    k.push(proto as u8);
    k.extend_from_slice(rest);
    Some(k)
}

impl PacketCache {
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    /// The answer to `packet` made while the index had `generation`, with `packet`'s ID.
    pub fn get(
        &self,
        packet: &[u8],
        proto: Proto,
        generation: u64,
    ) -> Option<(Vec<u8>, ResponseCode)> {
        if packet.len() < 12 {
            return None;
        }
        let k = key(packet, proto)?;
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let e = entries.get(&k)?;
        if e.generation != generation || e.made.elapsed() >= e.max_age {
            return None;
        }
        let mut answer = e.answer.clone();
        let rcode = e.rcode;
        drop(entries);
        answer[..2].copy_from_slice(&packet[..2]);
        Some((answer, rcode))
    }

    pub fn put(
        &self,
        packet: &[u8],
        proto: Proto,
        generation: u64,
        max_age: Duration,
        rcode: ResponseCode,
        answer: &[u8],
    ) {
        if packet.len() < 12 || answer.len() < 12 {
            return;
        }
        let Some(k) = key(packet, proto) else { return };
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= self.capacity {
            entries.clear();
        }
        entries.insert(
            k,
            Entry {
                generation,
                made: Instant::now(),
                max_age,
                rcode,
                answer: answer.to_vec(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(id: u16, rest: &[u8]) -> Vec<u8> {
        let mut p = id.to_be_bytes().to_vec();
        p.extend_from_slice(&[0; 10]);
        p.extend_from_slice(rest);
        p
    }

    #[test]
    fn same_question_same_answer_with_the_new_id() {
        let c = PacketCache::new(2);
        let a = packet(1, b"q");
        c.put(
            &a,
            Proto::Udp,
            7,
            CLUSTER_AGE,
            ResponseCode::NoError,
            &packet(1, b"answer"),
        );
        let (got, rcode) = c.get(&packet(9, b"q"), Proto::Udp, 7).unwrap();
        assert_eq!(got, packet(9, b"answer"));
        assert_eq!(rcode, ResponseCode::NoError);
        // Another transport, another index generation, another question: no.
        assert!(c.get(&packet(9, b"q"), Proto::Tcp, 7).is_none());
        assert!(c.get(&packet(9, b"q"), Proto::Udp, 8).is_none());
        assert!(c.get(&packet(9, b"Q"), Proto::Udp, 7).is_none());
        // Too old.
        c.put(
            &a,
            Proto::Udp,
            7,
            Duration::ZERO,
            ResponseCode::NoError,
            &packet(1, b"x"),
        );
        assert!(c.get(&a, Proto::Udp, 7).is_none());
        // Bounded.
        for i in 0..5u8 {
            c.put(
                &packet(1, &[i]),
                Proto::Udp,
                7,
                CLUSTER_AGE,
                ResponseCode::NoError,
                &packet(1, b"x"),
            );
        }
        assert!(c.entries.lock().unwrap().len() <= 2);
    }
}
