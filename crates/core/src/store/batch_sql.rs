//! Multi-row statement text: one `INSERT ... VALUES (...), (...)` per power of two of rows, so a
//! batch costs a few round trips and each connection caches only a few prepared statements.

use std::sync::{Arc, OnceLock};

/// How a statement names its parameters.
#[derive(Clone, Copy)]
pub(crate) enum Params {
    /// `?` (SQLite).
    Anonymous,
    /// `$1, $2, ...` (both backends).
    Numbered,
}

/// `{head}(..), (..){tail}` for `max_rows`, `max_rows / 2`, ..., 1 rows, each text written the
/// first time a batch needs it (a relay that only ever commits small batches never builds the
/// 1024-row texts; building them all at once was a visible part of a short run's CPU).
pub(crate) struct Statements {
    head: &'static str,
    columns: usize,
    tail: &'static str,
    params: Params,
    /// Largest first.
    texts: Vec<(usize, OnceLock<Arc<str>>)>,
}

pub(crate) fn statements(
    head: &'static str,
    columns: usize,
    tail: &'static str,
    max_rows: usize,
    params: Params,
) -> Statements {
    let mut texts = Vec::new();
    let mut rows = max_rows;
    while rows > 0 {
        texts.push((rows, OnceLock::new()));
        rows /= 2;
    }
    Statements {
        head,
        columns,
        tail,
        params,
        texts,
    }
}

impl Statements {
    /// The largest statement that fits `remaining` rows: `(rows, text)`.
    pub(crate) fn pick(&self, remaining: usize) -> (usize, Arc<str>) {
        let (rows, text) = self
            .texts
            .iter()
            .find(|(rows, _)| *rows <= remaining)
            .expect("a 1-row statement exists");
        (*rows, text.get_or_init(|| self.text(*rows)).clone())
    }

    fn text(&self, rows: usize) -> Arc<str> {
        use std::fmt::Write;
        let mut out =
            String::with_capacity(self.head.len() + self.tail.len() + rows * self.columns * 6);
        out.push_str(self.head);
        for row in 0..rows {
            out.push_str(if row == 0 { "(" } else { ", (" });
            for col in 0..self.columns {
                if col > 0 {
                    out.push_str(", ");
                }
                match self.params {
                    Params::Anonymous => out.push('?'),
                    Params::Numbered => {
                        let _ = write!(out, "${}", row * self.columns + col + 1);
                    }
                }
            }
            out.push(')');
        }
        out.push_str(self.tail);
        Arc::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_parameters_run_on_across_rows() {
        let all = statements("INSERT INTO t (a, b) VALUES ", 2, " X", 2, Params::Numbered);
        assert_eq!(all.texts.len(), 2);
        assert_eq!(
            &*all.pick(2).1,
            "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4) X"
        );
        assert_eq!(&*all.pick(1).1, "INSERT INTO t (a, b) VALUES ($1, $2) X");
        assert_eq!(all.pick(3).0, 2);
        assert_eq!(all.pick(1).0, 1);
        let anon = statements("V ", 1, "", 4, Params::Anonymous);
        assert_eq!(&*anon.pick(4).1, "V (?), (?), (?), (?)");
        assert_eq!(&*anon.pick(3).1, "V (?), (?)");
    }
}
