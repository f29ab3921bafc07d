//! Multi-row statement text: one `INSERT ... VALUES (...), (...)` per power of two of rows, so a
//! batch costs a few round trips and each connection caches only a few prepared statements.

use std::sync::Arc;

/// How a statement names its parameters.
#[derive(Clone, Copy)]
pub(crate) enum Params {
    /// `?` (SQLite).
    Anonymous,
    /// `$1, $2, ...` (both backends).
    Numbered,
}

/// `{head}(..), (..){tail}` for `max_rows`, `max_rows / 2`, ..., 1 rows (largest first).
pub(crate) fn statements(
    head: &str,
    columns: usize,
    tail: &str,
    max_rows: usize,
    params: Params,
) -> Vec<(usize, Arc<str>)> {
    let mut out = Vec::new();
    let mut rows = max_rows;
    while rows > 0 {
        let values: Vec<String> = (0..rows)
            .map(|row| {
                let cells: Vec<String> = (0..columns)
                    .map(|col| match params {
                        Params::Anonymous => "?".to_owned(),
                        Params::Numbered => format!("${}", row * columns + col + 1),
                    })
                    .collect();
                format!("({})", cells.join(", "))
            })
            .collect();
        out.push((
            rows,
            Arc::from(format!("{head}{}{tail}", values.join(", "))),
        ));
        rows /= 2;
    }
    out
}

/// The largest statement that fits `remaining` rows.
pub(crate) fn pick(statements: &[(usize, Arc<str>)], remaining: usize) -> (usize, Arc<str>) {
    let (rows, sql) = statements
        .iter()
        .find(|(rows, _)| *rows <= remaining)
        .expect("a 1-row statement exists");
    (*rows, sql.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_parameters_run_on_across_rows() {
        let all = statements("INSERT INTO t (a, b) VALUES ", 2, " X", 2, Params::Numbered);
        assert_eq!(all.len(), 2);
        assert_eq!(
            &*all[0].1,
            "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4) X"
        );
        assert_eq!(&*all[1].1, "INSERT INTO t (a, b) VALUES ($1, $2) X");
        assert_eq!(pick(&all, 3).0, 2);
        assert_eq!(pick(&all, 1).0, 1);
        let anon = statements("V ", 1, "", 4, Params::Anonymous);
        assert_eq!(&*anon[0].1, "V (?), (?), (?), (?)");
    }
}
