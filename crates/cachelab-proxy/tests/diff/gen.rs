//! A seeded generator of memcached text and meta requests, valid and mutated, for the
//! differential fuzz. Every request it makes is complete as memcached frames it (a data
//! block is never shorter than announced, so the sync request after it is never read
//! as data), and it avoids what docs/proxy.md lists as deliberate differences (control
//! characters in keys, NUL bytes, bare `\n`, the binary protocol, `stats`, `version`,
//! `gat`, an opaque over 32 bytes, a quiet `ma` creating its key, keys before an
//! over-long one in a multi-get) and what depends on the clock (`mg t`/`l`, `flush_all` with a delay).

use rand::{Rng, RngExt};

/// Keys shared by every connection, so requests meet each other's items.
const KEYS: &[&str] = &["a", "b", "c", "k1", "k2", "num", "long"];
const META_FLAGS: &[u8] = b"bNTRlOPLkscfvhuqFCMJDIE";

pub struct Gen<R> {
    rng: R,
}

impl<R: Rng> Gen<R> {
    pub fn new(rng: R) -> Self {
        Gen { rng }
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.rng.random_range(0..100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.rng.random_range(0..items.len())]
    }

    fn key(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..20) {
            0 => vec![b'x'; 250],
            1 => vec![b'y'; 251],
            _ => self.pick(KEYS).as_bytes().to_vec(),
        }
    }

    fn value(&mut self) -> Vec<u8> {
        if self.chance(30) {
            return self.rng.random_range(0..1000u32).to_string().into_bytes();
        }
        let len = self.rng.random_range(0..24);
        (0..len)
            .map(|_| *self.pick(b"abcdefghijklmnopqrstuvwxyz0123456789"))
            .collect()
    }

    /// A number field, sometimes malformed. Numbers that overflow a 32-bit field are
    /// left out: memcached truncates them silently where the proxy refuses them (a
    /// deliberate difference).
    fn number(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..12) {
            0 => b"x".to_vec(),
            1 => b"-1".to_vec(),
            2 => b"+3".to_vec(),
            3 => b"18446744073709551616".to_vec(),
            _ => self.rng.random_range(0..100u32).to_string().into_bytes(),
        }
    }

    /// A data length that is the block's own, or malformed, but never larger than the
    /// block (memcached would read the sync request after it as data).
    fn length(&mut self, len: usize) -> Vec<u8> {
        match self.rng.random_range(0..40) {
            0 => b"x".to_vec(),
            1 => b"-1".to_vec(),
            2 => format!("+{len}").into_bytes(),
            3 => format!("0{len}").into_bytes(),
            4 => b"18446744073709551616".to_vec(),
            _ => len.to_string().into_bytes(),
        }
    }

    /// One request, as bytes on the wire.
    pub fn request(&mut self) -> Vec<u8> {
        let mut out = match self.rng.random_range(0..16) {
            0..=2 => self.storage(),
            3..=4 => self.retrieval(),
            5 => self.simple(b"delete", false),
            6 => self.simple(b"incr", true),
            7 => self.simple(b"decr", true),
            8 => self.simple(b"touch", true),
            9..=10 => self.meta_get_like(),
            11..=12 => self.meta_set(),
            13 => self.misc(),
            _ => self.meta_get_like(),
        };
        if self.chance(5) {
            self.mutate_line(&mut out);
        }
        out
    }

    fn storage(&mut self) -> Vec<u8> {
        const STORAGE: &[&[u8]] = &[b"set", b"add", b"replace", b"append", b"prepend", b"cas"];
        let cmd = *self.pick(STORAGE);
        let key = self.key();
        let data = self.value();
        let mut line = [cmd, b" ", &key].concat();
        let flags = if self.chance(90) {
            b"0".to_vec()
        } else {
            self.number()
        };
        let exptime = if self.chance(90) {
            b"0".to_vec()
        } else {
            self.number()
        };
        let announced = self.length(data.len());
        for token in [flags, exptime, announced] {
            line.push(b' ');
            line.extend(token);
        }
        if cmd == b"cas" {
            line.push(b' ');
            line.extend(self.rng.random_range(0..40u32).to_string().into_bytes());
        }
        if self.chance(15) {
            line.extend(b" noreply");
        }
        self.end_with_block(line, &data)
    }

    /// Ends a storage line and appends its data block: usually as announced, sometimes
    /// longer than announced or with a bad terminator (never shorter).
    fn end_with_block(&mut self, mut line: Vec<u8>, data: &[u8]) -> Vec<u8> {
        line.extend(b"\r\n");
        line.extend(data);
        match self.rng.random_range(0..30) {
            0 => line.extend(b"xy\r\n"),
            1 => line.extend(b"zz"),
            _ => line.extend(b"\r\n"),
        }
        line
    }

    fn retrieval(&mut self) -> Vec<u8> {
        let cmd: &[u8] = if self.chance(30) { b"gets" } else { b"get" };
        let mut line = cmd.to_vec();
        let mut keys: Vec<Vec<u8>> = (0..self.rng.random_range(1..5))
            .map(|_| self.key())
            .collect();
        // memcached looks up the keys before an over-long one (marking them fetched)
        // where the proxy refuses the line whole: a listed difference, so it goes first.
        keys.sort_by_key(|k| k.len() <= 250);
        for key in keys {
            line.push(b' ');
            line.extend(key);
        }
        line.extend(b"\r\n");
        line
    }

    /// delete, incr, decr, touch: `cmd key [number] [noreply]`.
    fn simple(&mut self, cmd: &[u8], with_number: bool) -> Vec<u8> {
        let mut line = [cmd, b" "].concat();
        line.extend(self.key());
        if with_number || self.chance(10) {
            line.push(b' ');
            line.extend(self.number());
        }
        if self.chance(15) {
            line.extend(b" noreply");
        }
        line.extend(b"\r\n");
        line
    }

    fn meta_flags(&mut self, set: bool) -> Vec<u8> {
        let mut flags = Vec::new();
        for _ in 0..self.rng.random_range(0..5) {
            let letter = *self.pick(META_FLAGS);
            flags.push(b' ');
            flags.push(letter);
            match letter {
                b'N' | b'T' | b'R' | b'J' | b'D' => flags.extend(self.number()),
                b'C' => flags.extend(self.rng.random_range(0..40u32).to_string().into_bytes()),
                b'F' => flags.extend(self.number()),
                b'O' => flags.extend(self.rng.random_range(0..10_000u32).to_string().into_bytes()),
                b'M' => {
                    let modes: &[u8] = if set { b"EAPRSx" } else { b"I+D-x" };
                    flags.push(*self.pick(modes));
                }
                // Clock-dependent replies are left out of the comparison.
                b'l' | b't' => {
                    flags.pop();
                    flags.push(b'v');
                }
                _ => {}
            }
        }
        if self.chance(5) {
            // Suffixed flags read by their first byte, and repeats.
            flags.extend(b" qz v");
        }
        if self.chance(3) {
            for _ in 0..19 {
                flags.extend(b" v");
            }
        }
        flags
    }

    fn meta_key(&mut self) -> (Vec<u8>, bool) {
        use base64::Engine;
        let engine = base64::engine::general_purpose::STANDARD;
        match self.rng.random_range(0..12) {
            0 => (engine.encode(self.key()).into_bytes(), true),
            1 => (engine.encode(vec![b'x'; 200]).into_bytes(), true),
            2 => (b"a!b".to_vec(), true),
            _ => (self.key(), false),
        }
    }

    fn meta_get_like(&mut self) -> Vec<u8> {
        const META: &[&[u8]] = &[b"mg", b"mg", b"md", b"ma", b"me", b"mn"];
        let cmd = *self.pick(META);
        let mut line = cmd.to_vec();
        if cmd != b"mn" {
            let (key, base64) = self.meta_key();
            line.push(b' ');
            line.extend(key);
            if base64 {
                line.extend(b" b");
            }
            if cmd == b"ma" {
                // A quiet `ma` that creates its key (`N`) is answered by memcached, which
                // the proxy cannot tell from a found key's answer: a listed difference.
                let flags = self.meta_flags(false);
                let quiet = flags
                    .split(|b| *b == b' ')
                    .any(|t| t.first() == Some(&b'q'));
                for token in flags.split(|b| *b == b' ').filter(|t| !t.is_empty()) {
                    if !(quiet && token[0] == b'N') {
                        line.push(b' ');
                        line.extend_from_slice(token);
                    }
                }
            } else if cmd != b"me" {
                line.extend(self.meta_flags(false));
            }
        }
        line.extend(b"\r\n");
        line
    }

    fn meta_set(&mut self) -> Vec<u8> {
        let (key, base64) = self.meta_key();
        let data = self.value();
        let mut line = [&b"ms "[..], &key, b" "].concat();
        line.extend(self.length(data.len()));
        if base64 {
            line.extend(b" b");
        }
        line.extend(self.meta_flags(true));
        self.end_with_block(line, &data)
    }

    fn misc(&mut self) -> Vec<u8> {
        const MISC: &[&[u8]] = &[
            b"flush_all\r\n",
            b"flush_all noreply\r\n",
            b"verbosity 1\r\n",
            b"verbosity\r\n",
            b"verbosity noreply\r\n",
            b"verbosity 1 noreply\r\n",
            b"bogus command\r\n",
            b"\r\n",
            b"mz a\r\n",
        ];
        self.pick(MISC).to_vec()
    }

    /// Replaces a token of the command line with garbage, drops one, or repeats one.
    fn mutate_line(&mut self, request: &mut Vec<u8>) {
        let line_end = request.windows(2).position(|w| w == b"\r\n").unwrap_or(0);
        let (line, rest) = request.split_at(line_end);
        let mut tokens: Vec<Vec<u8>> = line
            .split(|b| *b == b' ')
            .filter(|t| !t.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        if tokens.len() < 2 {
            return;
        }
        let at = self.rng.random_range(1..tokens.len());
        // A repeated token could announce a longer block than follows (a number moved
        // into the length's place): only lines without a block repeat one.
        let choices = if rest.len() > 2 { 2 } else { 3 };
        match self.rng.random_range(0..choices) {
            0 => tokens[at] = b"zz".to_vec(),
            1 => {
                tokens.remove(at);
            }
            _ => {
                let copy = tokens[at].clone();
                tokens.insert(at, copy);
            }
        }
        let mut out = tokens.join(&b' ');
        out.extend_from_slice(rest);
        *request = out;
    }
}
