//! Timestamps: RFC 3339 in UTC with microseconds, fixed width
//! (`2026-04-20T12:34:56.123456Z`), so that they sort as strings.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `t` as `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
pub fn format(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, dd) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{dd:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

/// The current time, formatted.
pub fn now() -> String {
    format(SystemTime::now())
}

// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A time bound as given on the command line, turned into a string comparable with record
/// times: an RFC 3339 prefix in UTC (`2026-04-20`, `2026-04-20T12:30`, `…:56Z`), or an age
/// before now (`90s`, `15m`, `2h`, `7d`).
pub fn parse_bound(s: &str) -> Option<String> {
    let s = s.trim();
    if let Some(unit) = s.chars().last().filter(|c| "smhd".contains(*c))
        && let Ok(n) = s[..s.len() - 1].parse::<u64>() {
            let mult = match unit {
                's' => 1,
                'm' => 60,
                'h' => 3600,
                _ => 86_400,
            };
            let t = SystemTime::now().checked_sub(Duration::from_secs(n.checked_mul(mult)?))?;
            return Some(format(t));
        }
    let s = s.strip_suffix('Z').unwrap_or(s);
    // Check the prefix against the fixed shape.
    const SHAPE: &[u8] = b"dddd-dd-ddTdd:dd:dd.dddddd";
    if s.len() < 4 || s.len() > SHAPE.len() {
        return None;
    }
    for (c, want) in s.bytes().zip(SHAPE.iter()) {
        let ok = match want {
            b'd' => c.is_ascii_digit(),
            b'T' => c == b'T' || c == b't' || c == b' ',
            w => c == *w,
        };
        if !ok {
            return None;
        }
    }
    Some(s.replacen([' ', 't'], "T", 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_fixed_width() {
        let t = UNIX_EPOCH + Duration::from_micros(1_776_688_496_123_456);
        assert_eq!(format(t), "2026-04-20T12:34:56.123456Z");
        assert_eq!(format(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
    }

    #[test]
    fn bounds() {
        assert_eq!(parse_bound("2026-04-20").unwrap(), "2026-04-20");
        assert_eq!(parse_bound("2026-04-20 12:30").unwrap(), "2026-04-20T12:30");
        assert!(parse_bound("yesterday").is_none());
        assert!(parse_bound("2026-4-20").is_none());
        assert!(parse_bound("10m").unwrap() < now());
    }
}
