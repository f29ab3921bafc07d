//! Wall-clock helpers every crate uses: now in Unix milliseconds, and UTC times written as
//! RFC 3339 (`2026-05-04T10:11:12.123Z`), with no time-zone database.

pub use crate::ids::now_ms;

/// Unix milliseconds as RFC 3339 in UTC with milliseconds (`YYYY-MM-DDTHH:MM:SS.mmmZ`).
pub fn rfc3339_ms(ms: i64) -> String {
    let (date, clock) = civil(ms.div_euclid(1000));
    format!("{date}T{clock}.{:03}Z", ms.rem_euclid(1000))
}

/// Unix seconds and microseconds as RFC 3339 in UTC with microseconds (as Codex writes its
/// login's `last_refresh`).
pub fn rfc3339_micros(secs: i64, micros: u32) -> String {
    let (date, clock) = civil(secs);
    format!("{date}T{clock}.{micros:06}Z")
}

/// Now as [`rfc3339_micros`].
pub fn rfc3339_now_micros() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339_micros(d.as_secs() as i64, d.subsec_micros())
}

/// The UTC date (`YYYY-MM-DD`) and time of day (`HH:MM:SS`) of Unix second `secs`.
fn civil(secs: i64) -> (String, String) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        format!("{year:04}-{month:02}-{day:02}"),
        format!("{:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_rfc3339_in_utc() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_614_265_330_123), "2021-02-25T15:02:10.123Z");
        assert_eq!(rfc3339_ms(1_795_338_287_754), "2026-11-22T09:04:47.754Z");
        assert_eq!(rfc3339_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339_ms(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(
            rfc3339_micros(1_777_889_472, 123_456),
            "2026-05-04T10:11:12.123456Z"
        );
        let now = rfc3339_now_micros();
        assert!(now.len() == 27 && now.ends_with('Z'), "{now}");
    }
}
