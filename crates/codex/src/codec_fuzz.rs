//! Property tests of [`BoundedLines`]: whatever the bytes and however they are split into
//! reads, the frames are those of a plain model of the format, and nothing panics.

use proptest::prelude::*;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::Decoder;

use super::{BoundedLines, Frame};

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

/// The format, read the simple way: split on `\n`; a line longer than `max` is `Overlong`;
/// one `\r` before the newline is dropped; blank lines are skipped; non-UTF-8 is `NotUtf8`.
fn model(max: usize, input: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut parts: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
    let tail = parts.pop().unwrap_or_default();
    if !tail.is_empty() {
        parts.push(tail);
    }
    for raw in parts {
        if raw.len() > max {
            out.push(Frame::Overlong { bytes: raw.len() });
            continue;
        }
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        match std::str::from_utf8(line) {
            Ok(s) if s.trim().is_empty() => {}
            Ok(s) => out.push(Frame::Line(s.to_owned())),
            Err(_) => out.push(Frame::NotUtf8 { bytes: line.len() }),
        }
    }
    out
}

fn decode(max: usize, input: &[u8], reads: &[usize]) -> Vec<Frame> {
    let mut codec = BoundedLines::new(max);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut rest = input;
    let mut sizes = reads.iter().cycle();
    while !rest.is_empty() {
        let n = (*sizes.next().unwrap()).clamp(1, rest.len());
        buf.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        while let Some(f) = codec.decode(&mut buf).unwrap() {
            out.push(f);
        }
    }
    while let Some(f) = codec.decode_eof(&mut buf).unwrap() {
        out.push(f);
    }
    out
}

/// Bytes rich in what matters to the decoder: newlines, CRs, spaces, UTF-8 and broken UTF-8.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b" ".to_vec()),
        Just(b"\r".to_vec()),
        Just("é😀\u{3000}".as_bytes().to_vec()),
        Just(vec![0xff, 0xfe]),
        Just(vec![0xf0, 0x9f]),
        "[a-z{}\":,]{1,20}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 1..8),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn fuzz_frames_match_the_model_whatever_the_reads(
        max in 1usize..48,
        input in stream(),
        reads in prop::collection::vec(1usize..64, 1..8),
    ) {
        prop_assert_eq!(decode(max, &input, &reads), model(max, &input));
    }
}

/// Found by `fuzz_frames_match_the_model_whatever_the_reads`: an overlong last line with no
/// newline left a stale scan offset behind, and the next `decode_eof` (which `FramedRead`
/// always makes) sliced past the empty buffer: the peer's reader task panicked when Codex
/// wrote a huge line and exited without finishing it.
#[test]
fn fuzz_regression_an_unterminated_overlong_tail_does_not_panic_at_eof() {
    let mut input = b"{}\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', 40));
    assert_eq!(
        decode(18, &input, &[1]),
        vec![Frame::Line("{}".into()), Frame::Overlong { bytes: 40 }]
    );
}

/// Found by `fuzz_frames_match_the_model_whatever_the_reads`: a blank last line with no
/// newline (Codex exiting after writing spaces) came out as a `Line` of spaces at EOF, which
/// the reader then logged as a junk line; everywhere else blank lines are skipped.
#[test]
fn fuzz_regression_a_blank_tail_at_eof_is_skipped() {
    assert_eq!(
        decode(16, b"{}\n  \r", &[1]),
        vec![Frame::Line("{}".into())]
    );
    assert_eq!(decode(16, b" ", &[4]), vec![]);
}
