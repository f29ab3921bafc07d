//! Unguessable identifiers and the clock.

use std::io::Read;

/// `prefix` + 128 random bits in hex, from the OS's random source.
pub fn random_id(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    let filled = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok();
    if !filled {
        // No /dev/urandom (a very odd system): SipHash with random keys, per half.
        use std::hash::{BuildHasher, Hasher};
        for half in bytes.chunks_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(now_nanos());
            half.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    let mut out = String::with_capacity(prefix.len() + 32);
    out.push_str(prefix);
    for b in bytes {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

fn now_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

/// Unix milliseconds.
pub fn now_ms() -> i64 {
    (now_nanos() / 1_000_000) as i64
}
