//! Values written as kubectl writes them, parsed once for every layer that reads them (the
//! command line, the environment): durations such as `30s`, `5m`, `1h30m`, `500ms`.

use std::time::Duration;

/// Why a duration does not parse; the text is as written (trimmed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Longer than [`LONGEST`].
    #[error("invalid duration {text:?}: longer than {hours}h, the longest wait that is honoured")]
    LongerThanHonoured {
        /// The duration as written.
        text: String,
        /// [`LONGEST`] in hours.
        hours: u64,
    },
    /// A unit other than `ms`, `s`, `m`, `h`.
    #[error("invalid duration {text:?}: unknown unit {unit:?} (use ms, s, m or h)")]
    UnknownUnit {
        /// The duration as written.
        text: String,
        /// The unknown unit's first character.
        unit: char,
    },
    /// A unit with no number before it.
    #[error("invalid duration {0:?}: expected a number before the unit")]
    NoNumber(String),
    /// More than a `Duration` holds.
    #[error("invalid duration {0:?}: too long")]
    Overflow(String),
    /// Neither a number of seconds nor numbers with units.
    #[error("invalid duration {0:?}: expected e.g. 30s, 5m, 1h30m")]
    Malformed(String),
}

/// Parses a kubectl-style duration: `0`, `30`, `30s`, `5m`, `1h`, `1m30s`, `500ms`.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let parsed = parse_any_duration(text)?;
    if parsed > LONGEST {
        return Err(DurationError::LongerThanHonoured {
            text: text.trim().to_string(),
            hours: LONGEST.as_secs() / 3600,
        });
    }
    Ok(parsed)
}

/// The longest duration a flag accepts: a deadline this far ahead is still a point in time the
/// clock can hold (`Instant + Duration` panics past its end), and no wait needs more.
pub const LONGEST: Duration = Duration::from_secs(366 * 24 * 3600);

fn parse_any_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    let mut total = Duration::ZERO;
    let mut number = String::new();
    let mut chars = text.chars().peekable();
    let mut saw_unit = false;
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            number.push(c);
            continue;
        }
        let unit = match (c, chars.peek()) {
            ('m', Some('s')) => {
                chars.next();
                0.001
            }
            ('h', _) => 3600.0,
            ('m', _) => 60.0,
            ('s', _) => 1.0,
            _ => {
                return Err(DurationError::UnknownUnit {
                    text: text.to_string(),
                    unit: c,
                })
            }
        };
        let value: f64 = number.parse().map_err(|_| DurationError::NoNumber(text.to_string()))?;
        total = Duration::try_from_secs_f64(value * unit)
            .ok()
            .and_then(|part| total.checked_add(part))
            .ok_or_else(|| DurationError::Overflow(text.to_string()))?;
        number.clear();
        saw_unit = true;
    }
    if !number.is_empty() || !saw_unit {
        return Err(DurationError::Malformed(text.to_string()));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_kubectl() {
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn durations_past_the_longest_are_refused_not_overflowed() {
        assert_eq!(parse_duration("8784h").unwrap(), LONGEST);
        for huge in ["18446744073709551615", "18446744073709551615s", "8785h", "1e300s"] {
            assert!(parse_duration(huge).is_err(), "{huge}");
        }
        // Every accepted duration can be added to the clock.
        let _ = std::time::Instant::now() + parse_duration("8784h").unwrap();
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let message = |text: &str| parse_duration(text).unwrap_err().to_string();
        assert_eq!(
            message(" 5x "),
            "invalid duration \"5x\": unknown unit 'x' (use ms, s, m or h)"
        );
        assert_eq!(
            message("m"),
            "invalid duration \"m\": expected a number before the unit"
        );
        assert_eq!(
            message("99999999999999999999h"),
            "invalid duration \"99999999999999999999h\": too long"
        );
        assert_eq!(message("1m5"), "invalid duration \"1m5\": expected e.g. 30s, 5m, 1h30m");
        assert_eq!(
            message("1e300s"),
            "invalid duration \"1e300s\": unknown unit 'e' (use ms, s, m or h)"
        );
        assert_eq!(
            message("8785h"),
            "invalid duration \"8785h\": longer than 8784h, the longest wait that is honoured"
        );
    }
}
