//! The read side of a server connection that several workers share: the replies come
//! back in the order the requests went out, so each is handed to the worker that sent
//! its request. Pure: bytes in, (worker, bytes) out; the scan that finds where one
//! reply ends is the one the workers' engines parse with ([`ReplyScan`]).
//!
//! A reply that arrives whole is handed over with what the scan found ([`Framed`]), so
//! the worker's engine does not frame it again.
//!
//! A reply still arriving is handed over as it comes (all of it but what the scan must
//! see again), so a large reply is never held here: the worker's engine holds it, under
//! the memory budget and `--max-reply-bytes`, as it would on a connection of its own.

use std::collections::VecDeque;

use bytes::{Buf, BytesMut};
use cachelab_protocol::{Expect, Reply, ReplyScan};

/// What the scan found of a reply handed over whole: its kind and summary. The worker's
/// engine uses it instead of framing the reply again (`worker/engine/hints.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framed {
    pub expect: Expect,
    pub reply: Reply,
}

/// The owner of a reply nobody wants any more ([`Demux::abandon`]).
const NOBODY: usize = usize::MAX;

/// Why the bytes read cannot be handed out: the connection is out of step and must go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// Bytes arrived with no reply owed.
    Extra,
    /// The bytes cannot be the reply owed next.
    Malformed,
}

/// The replies owed on one shared connection, oldest first, and where the oldest one
/// stands.
#[derive(Debug, Default)]
pub struct Demux {
    owed: VecDeque<(usize, Expect)>,
    scan: Option<ReplyScan>,
}

impl Demux {
    /// A request of `worker` went out that gets a reply of kind `expect`.
    pub fn owe(&mut self, worker: usize, expect: Expect) {
        self.owed.push_back((worker, expect));
    }

    /// Whether no reply is owed.
    pub fn is_empty(&self) -> bool {
        self.owed.is_empty()
    }

    /// Hands the bytes of `buf` to the workers they answer, in order, through
    /// `deliver(worker, bytes, framed)` (`framed` when the bytes are exactly one whole
    /// reply); what cannot be handed out yet stays in `buf`.
    pub fn route(
        &mut self,
        buf: &mut BytesMut,
        mut deliver: impl FnMut(usize, &[u8], Option<Framed>),
    ) -> Result<(), Lost> {
        while !buf.is_empty() {
            let Some(&(worker, expect)) = self.owed.front() else {
                return Err(Lost::Extra);
            };
            let scan = self.scan.get_or_insert_with(|| ReplyScan::new(expect));
            match scan.advance(buf) {
                Ok(Some(len)) => {
                    if worker != NOBODY {
                        let reply = &buf[..len];
                        // Framed only if none of it was handed over before.
                        let framed = scan
                            .from_first_byte()
                            .then(|| scan.reply(reply).ok())
                            .flatten()
                            .map(|reply| Framed { expect, reply });
                        deliver(worker, reply, framed);
                    }
                    buf.advance(len);
                    self.scan = None;
                    self.owed.pop_front();
                }
                Ok(None) => {
                    let n = scan.discardable(buf);
                    if n > 0 {
                        if worker != NOBODY {
                            deliver(worker, &buf[..n], None);
                        }
                        scan.discard(n);
                        buf.advance(n);
                    }
                    return Ok(());
                }
                Err(_) => return Err(Lost::Malformed),
            }
        }
        Ok(())
    }

    /// The connection is gone: nothing is owed any more. Returns the workers that were
    /// owed replies (each once, in the order of their oldest reply).
    pub fn clear(&mut self) -> Vec<usize> {
        let mut workers: Vec<usize> = Vec::new();
        for (worker, _) in self.owed.drain(..) {
            if worker != NOBODY && !workers.contains(&worker) {
                workers.push(worker);
            }
        }
        self.scan = None;
        workers
    }

    /// `worker` no longer wants its replies: they are read past, their bytes dropped.
    pub fn abandon(&mut self, worker: usize) {
        for owed in self.owed.iter_mut().filter(|(w, _)| *w == worker) {
            owed.0 = NOBODY;
        }
    }

    /// `worker` gave up on its replies (it closed the connection): forgets them.
    pub fn forget(&mut self, worker: usize) {
        if self.owed.front().is_some_and(|&(w, _)| w == worker) {
            self.scan = None;
        }
        self.owed.retain(|&(w, _)| w != worker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What each worker was handed, run by run.
    type Handed = Vec<(usize, Vec<u8>)>;

    fn routed(demux: &mut Demux, chunks: &[&[u8]]) -> (Handed, Result<(), Lost>) {
        let mut buf = BytesMut::new();
        let mut out: Vec<(usize, Vec<u8>)> = Vec::new();
        for chunk in chunks {
            buf.extend_from_slice(chunk);
            let result = demux.route(&mut buf, |w, bytes, _| match out.last_mut() {
                Some((last, held)) if *last == w => held.extend_from_slice(bytes),
                _ => out.push((w, bytes.to_vec())),
            });
            if result.is_err() {
                return (out, result);
            }
        }
        (out, Ok(()))
    }

    #[test]
    fn each_reply_goes_to_the_worker_that_asked() {
        let mut demux = Demux::default();
        demux.owe(2, Expect::Values);
        demux.owe(0, Expect::Store);
        demux.owe(2, Expect::Values);
        let stream: &[u8] = b"VALUE a 0 1\r\nx\r\nEND\r\nSTORED\r\nEND\r\n";
        let (out, result) = routed(&mut demux, &[stream]);
        assert_eq!(result, Ok(()));
        assert_eq!(
            out,
            vec![
                (2, b"VALUE a 0 1\r\nx\r\nEND\r\n".to_vec()),
                (0, b"STORED\r\n".to_vec()),
                (2, b"END\r\n".to_vec()),
            ]
        );
        assert!(demux.is_empty());
    }

    #[test]
    fn a_reply_that_came_whole_is_handed_over_with_its_frame() {
        let mut demux = Demux::default();
        demux.owe(0, Expect::Values);
        demux.owe(1, Expect::Values);
        demux.owe(0, Expect::Store);
        let mut buf = BytesMut::from(&b"VALUE a 0 1\r\nx\r\nEND\r\nVALUE b 0 3\r\nxy"[..]);
        let mut frames = Vec::new();
        let mut route = |demux: &mut Demux, buf: &mut BytesMut| {
            demux
                .route(buf, |w, bytes, framed| {
                    frames.push((w, bytes.to_vec(), framed))
                })
                .unwrap()
        };
        route(&mut demux, &mut buf);
        buf.extend_from_slice(b"z\r\nEND\r\nSTORED\r\n");
        route(&mut demux, &mut buf);
        let values = |hits, body_len| {
            Some(Framed {
                expect: Expect::Values,
                reply: Reply::Values { hits, body_len },
            })
        };
        let stored = Some(Framed {
            expect: Expect::Store,
            reply: Reply::Stored,
        });
        let want: Vec<(usize, Vec<u8>, Option<Framed>)> = vec![
            (0, b"VALUE a 0 1\r\nx\r\nEND\r\n".to_vec(), values(1, 16)),
            // Its start was handed over before its end came: no frame for the rest.
            (1, b"VALUE b 0 3\r\nxy".to_vec(), None),
            (1, b"z\r\nEND\r\n".to_vec(), None),
            (0, b"STORED\r\n".to_vec(), stored),
        ];
        assert_eq!(frames, want);
    }

    #[test]
    fn a_reply_in_pieces_is_handed_on_as_it_comes() {
        let mut demux = Demux::default();
        demux.owe(1, Expect::Values);
        let value = vec![b'v'; 100_000];
        let mut reply = b"VALUE k 0 100000\r\n".to_vec();
        reply.extend_from_slice(&value);
        reply.extend_from_slice(b"\r\nEND\r\n");
        let mut buf = BytesMut::new();
        let mut handed = 0;
        let mut most_held = 0;
        for piece in reply.chunks(4096) {
            buf.extend_from_slice(piece);
            demux
                .route(&mut buf, |w, bytes, framed| {
                    assert_eq!(w, 1);
                    assert_eq!(framed, None, "a reply in pieces has no frame");
                    handed += bytes.len();
                })
                .unwrap();
            most_held = most_held.max(buf.len());
        }
        assert_eq!(handed, reply.len());
        assert!(most_held <= 4096, "held {most_held} bytes");
        assert!(demux.is_empty());
    }

    #[test]
    fn bytes_nobody_asked_for_or_that_are_no_reply_lose_the_connection() {
        let mut demux = Demux::default();
        demux.owe(0, Expect::Store);
        let (_, result) = routed(&mut demux, &[b"STORED\r\nSTORED\r\n"]);
        assert_eq!(result, Err(Lost::Extra));
        let mut demux = Demux::default();
        demux.owe(0, Expect::Resp);
        let (_, result) = routed(&mut demux, &[b"?what\r\n"]);
        assert_eq!(result, Err(Lost::Malformed));
    }

    #[test]
    fn a_worker_that_closed_the_connection_is_owed_nothing() {
        let mut demux = Demux::default();
        demux.owe(0, Expect::Store);
        demux.owe(1, Expect::Store);
        demux.owe(0, Expect::Values);
        demux.forget(0);
        assert_eq!(demux.clear(), vec![1]);
        assert!(demux.is_empty());
    }

    #[test]
    fn replies_nobody_wants_are_read_past() {
        let mut demux = Demux::default();
        demux.owe(0, Expect::Values);
        demux.owe(1, Expect::Store);
        demux.owe(0, Expect::Store);
        let (first, result) = routed(&mut demux, &[b"VALUE big 0 10\r\n01234"]);
        assert_eq!(result, Ok(()));
        assert_eq!(first, vec![(0, b"VALUE big 0 10\r\n01234".to_vec())]);
        demux.abandon(0);
        let (rest, result) = routed(&mut demux, &[b"56789\r\nEND\r\nSTORED\r\nNOT_STORED\r\n"]);
        assert_eq!(result, Ok(()));
        assert_eq!(rest, vec![(1, b"STORED\r\n".to_vec())]);
        assert!(demux.is_empty());
    }

    /// One reply of each kind the proxy's workers wait for.
    fn reply(kind: u8, n: usize) -> (Expect, Vec<u8>) {
        match kind % 5 {
            0 => (Expect::Store, b"STORED\r\n".to_vec()),
            1 => (Expect::Values, b"END\r\n".to_vec()),
            2 => {
                let mut r = format!("VALUE k{n} 0 {n}\r\n").into_bytes();
                r.extend(std::iter::repeat_n(b'\n', n));
                r.extend_from_slice(b"\r\nEND\r\n");
                (Expect::Values, r)
            }
            3 => (
                Expect::Resp,
                format!("${n}\r\n{}\r\n", "\r".repeat(n)).into_bytes(),
            ),
            _ => (Expect::Resp, b"*2\r\n$1\r\na\r\n$-1\r\n".to_vec()),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 200,
            rng_seed: proptest::test_runner::RngSeed::Fixed(34),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Whatever the replies and however the reads cut them, each worker gets
        /// exactly its own replies, in order, and nothing is left over.
        #[test]
        fn every_worker_gets_exactly_its_replies(
            replies in proptest::collection::vec((0usize..4, any::<u8>(), 0usize..300), 1..40),
            cuts in proptest::collection::vec(1usize..700, 1..60),
        ) {
            let mut demux = Demux::default();
            let mut stream = Vec::new();
            let mut want: Vec<Vec<u8>> = vec![Vec::new(); 4];
            for &(worker, kind, n) in &replies {
                let (expect, bytes) = reply(kind, n);
                demux.owe(worker, expect);
                stream.extend_from_slice(&bytes);
                want[worker].extend_from_slice(&bytes);
            }
            let mut got: Vec<Vec<u8>> = vec![Vec::new(); 4];
            let mut buf = BytesMut::new();
            let mut at = 0;
            for cut in cuts.iter().cycle() {
                if at == stream.len() {
                    break;
                }
                let end = (at + cut).min(stream.len());
                buf.extend_from_slice(&stream[at..end]);
                at = end;
                demux.route(&mut buf, |w, bytes, _| got[w].extend_from_slice(bytes)).unwrap();
            }
            prop_assert_eq!(got, want);
            prop_assert!(buf.is_empty() && demux.is_empty());
        }
    }
}
