//! A line decoder with a length limit that reports overlong and non-UTF-8 lines as frames
//! instead of errors, so one bad line never ends the stream.

use tokio_util::bytes::BytesMut;
use tokio_util::codec::Decoder;

/// One decoded frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    Line(String),
    /// A line longer than the limit was skipped; `bytes` counts what was discarded.
    Overlong {
        bytes: usize,
    },
    /// A line that is not UTF-8 was skipped.
    NotUtf8 {
        bytes: usize,
    },
}

pub struct BoundedLines {
    max: usize,
    /// Bytes already searched for a newline in the buffer.
    scanned: usize,
    /// Discarding the rest of an overlong line; the count so far.
    discarding: Option<usize>,
}

impl BoundedLines {
    pub fn new(max: usize) -> Self {
        Self {
            max,
            scanned: 0,
            discarding: None,
        }
    }

    fn take_line(&mut self, buf: &mut BytesMut, newline_at: usize) -> Frame {
        let mut line = buf.split_to(newline_at + 1);
        line.truncate(newline_at);
        if line.last() == Some(&b'\r') {
            line.truncate(line.len() - 1);
        }
        self.scanned = 0;
        match String::from_utf8(line.to_vec()) {
            Ok(s) => Frame::Line(s),
            Err(e) => Frame::NotUtf8 {
                bytes: e.as_bytes().len(),
            },
        }
    }
}

impl Decoder for BoundedLines {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, std::io::Error> {
        loop {
            if let Some(dropped) = self.discarding {
                match buf.iter().position(|b| *b == b'\n') {
                    Some(i) => {
                        let _ = buf.split_to(i + 1);
                        self.discarding = None;
                        self.scanned = 0;
                        return Ok(Some(Frame::Overlong { bytes: dropped + i }));
                    }
                    None => {
                        self.discarding = Some(dropped + buf.len());
                        buf.clear();
                        return Ok(None);
                    }
                }
            }
            let end = buf.len().min(self.max + 1);
            if let Some(i) = buf[self.scanned..end].iter().position(|b| *b == b'\n') {
                let at = self.scanned + i;
                let frame = self.take_line(buf, at);
                if matches!(&frame, Frame::Line(s) if s.trim().is_empty()) {
                    continue;
                }
                return Ok(Some(frame));
            }
            if buf.len() > self.max {
                // Discarding clears the buffer: nothing in it is scanned any more.
                self.discarding = Some(0);
                self.scanned = 0;
                continue;
            }
            self.scanned = buf.len();
            return Ok(None);
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, std::io::Error> {
        if let Some(frame) = self.decode(buf)? {
            return Ok(Some(frame));
        }
        if let Some(dropped) = self.discarding.take() {
            return Ok(Some(Frame::Overlong { bytes: dropped }));
        }
        if buf.is_empty() {
            return Ok(None);
        }
        let len = buf.len();
        buf.extend_from_slice(b"\n");
        match self.take_line(buf, len) {
            // A blank last line is skipped, like every blank line.
            Frame::Line(s) if s.trim().is_empty() => Ok(None),
            frame => Ok(Some(frame)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(max: usize, input: &[u8]) -> Vec<Frame> {
        let mut codec = BoundedLines::new(max);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        // Feed in small chunks to exercise partial reads.
        for chunk in input.chunks(3) {
            buf.extend_from_slice(chunk);
            while let Some(f) = codec.decode(&mut buf).unwrap() {
                out.push(f);
            }
        }
        while let Some(f) = codec.decode_eof(&mut buf).unwrap() {
            out.push(f);
        }
        out
    }

    #[test]
    fn overlong_and_non_utf8_lines_are_frames_and_the_stream_goes_on() {
        let mut input = b"{\"a\":1}\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 50));
        input.extend(b"\n\xff\xfe\n\r\n{\"b\":2}\r\ntail".iter());
        let frames = decode_all(16, &input);
        assert_eq!(
            frames,
            vec![
                Frame::Line("{\"a\":1}".into()),
                Frame::Overlong { bytes: 50 },
                Frame::NotUtf8 { bytes: 2 },
                Frame::Line("{\"b\":2}".into()),
                Frame::Line("tail".into()),
            ]
        );
    }

    #[test]
    fn a_line_of_exactly_the_limit_passes() {
        let frames = decode_all(4, b"abcd\nabcde\n");
        assert_eq!(
            frames,
            vec![Frame::Line("abcd".into()), Frame::Overlong { bytes: 5 }]
        );
    }
}

#[cfg(test)]
#[path = "codec_fuzz.rs"]
mod fuzz;
