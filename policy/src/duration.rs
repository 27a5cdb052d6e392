//! Durations written with units, as operators write them in TOML: `"90s"`, `"20m"`, `"1h30m"`, `"2d"`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A span of time in whole seconds, read from and written to config as a string with units.
///
/// Accepted units: `s`, `m`, `h`, `d`, combined largest first without spaces (`"1h30m"`).
/// A bare number without a unit is rejected, so that `window = 20` cannot silently mean 20 s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DurationS(pub i64);

/// Why a duration string was rejected. Carries the offending text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Empty string.
    #[error("empty duration; write it with a unit, e.g. \"20m\"")]
    Empty,
    /// A number with no unit after it, or a unit with no number before it.
    #[error("duration {text:?} needs a unit after each number (s, m, h, d), e.g. \"20m\" or \"1h30m\"")]
    BadUnit {
        /// The rejected text.
        text: String,
    },
    /// Letters that are not one of the units `s`, `m`, `h`, `d` (operator trial 17: `"20M"`
    /// was told it "needs a unit", when the unit was there in upper case).
    #[error("duration {text:?}: unit {unit:?} is not one of s, m, h, d{hint}")]
    UnknownUnit {
        /// The rejected text.
        text: String,
        /// The unit as written: the run of letters that holds the first unknown one.
        unit: String,
        /// `" (units are lower-case)"` when the unit in lower case is one of them, else empty.
        hint: &'static str,
    },
    /// A character that is neither a digit nor a unit letter: a sign, a decimal point, a space.
    #[error("duration {text:?}: unexpected {ch:?}; write whole numbers with units, largest first, without signs, points or spaces, e.g. \"1h30m\"")]
    UnexpectedChar {
        /// The rejected text.
        text: String,
        /// The first unexpected character.
        ch: char,
    },
    /// A leading minus sign: durations are 0s or longer.
    #[error("duration {text:?} is negative; durations are 0s or longer")]
    Negative {
        /// The rejected text.
        text: String,
    },
    /// Units out of order or repeated (`"30m1h"`, `"1h1h"`): write each unit once, largest
    /// first.
    #[error("duration {text:?}: units must come largest first, each once (d, h, m, s), e.g. \"1h30m\"")]
    UnitOrder {
        /// The rejected text.
        text: String,
    },
    /// The value does not fit in i64 seconds.
    #[error("duration {text:?} is too large")]
    Overflow {
        /// The rejected text.
        text: String,
    },
}

impl DurationS {
    /// Seconds as i64.
    pub fn secs(self) -> i64 {
        self.0
    }

    /// Parses `"20m"`, `"90s"`, `"1h30m"`, `"2d"`, `"0s"`. See [`DurationError`] for failures.
    pub fn parse(text: &str) -> Result<DurationS, DurationError> {
        let s = text;
        if s.trim().is_empty() {
            return Err(DurationError::Empty);
        }
        if s.trim_start().starts_with('-') {
            return Err(DurationError::Negative { text: text.to_string() });
        }
        let bad = || DurationError::BadUnit { text: text.to_string() };
        let overflow = || DurationError::Overflow { text: text.to_string() };
        let mut total: i64 = 0;
        let mut num: Option<i64> = None;
        let mut last_unit = i64::MAX;
        for (i, c) in s.char_indices() {
            if let Some(d) = c.to_digit(10) {
                let n = num.unwrap_or(0);
                num = Some(n.checked_mul(10).and_then(|n| n.checked_add(d as i64)).ok_or_else(overflow)?);
                continue;
            }
            let unit: i64 = match c {
                's' => 1,
                'm' => 60,
                'h' => 3600,
                'd' => 86_400,
                c if !c.is_alphabetic() => {
                    return Err(DurationError::UnexpectedChar {
                        text: text.to_string(),
                        ch: c,
                    })
                }
                _ => return Err(unknown_unit(text, i)),
            };
            let n = num.take().ok_or_else(bad)?;
            if unit >= last_unit {
                return Err(DurationError::UnitOrder { text: text.to_string() });
            }
            last_unit = unit;
            total = n.checked_mul(unit).and_then(|v| total.checked_add(v)).ok_or_else(overflow)?;
        }
        if num.is_some() {
            return Err(bad());
        }
        Ok(DurationS(total))
    }
}

/// [`DurationError::UnknownUnit`] for the letter at byte `at` of `text`: the unit is the whole
/// run of letters around it, as written (`"M"` in `"20M"`, `"min"` in `"20min"`).
fn unknown_unit(text: &str, at: usize) -> DurationError {
    let start = text[..at].rfind(|c: char| !c.is_alphabetic()).map_or(0, |i| i + 1);
    let end = text[at..].find(|c: char| !c.is_alphabetic()).map_or(text.len(), |i| at + i);
    let unit = text[start..end].to_string();
    let hint = if ["s", "m", "h", "d"].contains(&unit.to_lowercase().as_str()) {
        " (units are lower-case)"
    } else {
        ""
    };
    DurationError::UnknownUnit {
        text: text.to_string(),
        unit,
        hint,
    }
}

impl fmt::Display for DurationS {
    /// Writes the shortest exact form: `"20m"`, `"90s"`, `"1h30m"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return write!(f, "0s");
        }
        if self.0 < 0 {
            write!(f, "-")?;
        }
        // `unsigned_abs`: `i64::MIN` has no positive i64.
        let mut s = self.0.unsigned_abs();
        for (unit, name) in [(86_400, 'd'), (3600, 'h'), (60, 'm'), (1, 's')] {
            if s >= unit {
                write!(f, "{}{}", s / unit, name)?;
                s %= unit;
            }
        }
        Ok(())
    }
}

impl Serialize for DurationS {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DurationS {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        let text = String::deserialize(de)?;
        DurationS::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_durations_say_so() {
        for t in ["-5m", " -1s", "-0s"] {
            assert_eq!(DurationS::parse(t), Err(DurationError::Negative { text: t.to_string() }), "{t}");
        }
        for (t, ch) in [("1h-30m", '-'), ("1.5h", '.'), ("20 m", ' '), ("+5m", '+')] {
            assert_eq!(
                DurationS::parse(t),
                Err(DurationError::UnexpectedChar { text: t.to_string(), ch }),
                "{t}"
            );
        }
        assert!(matches!(DurationS::parse("20x"), Err(DurationError::UnknownUnit { .. })));
    }

    #[test]
    fn parses_units_and_combinations() {
        assert_eq!(DurationS::parse("20m"), Ok(DurationS(1200)));
        assert_eq!(DurationS::parse("90s"), Ok(DurationS(90)));
        assert_eq!(DurationS::parse("1h30m"), Ok(DurationS(5400)));
        assert_eq!(DurationS::parse("2d"), Ok(DurationS(172_800)));
        assert_eq!(DurationS::parse("0s"), Ok(DurationS(0)));
    }

    #[test]
    fn rejects_spaces_around_and_units_out_of_order() {
        for t in [" 5m", "5m ", "\t20m"] {
            assert!(matches!(DurationS::parse(t), Err(DurationError::UnexpectedChar { .. })), "{t:?}");
        }
        for t in ["30m1h", "1h1h", "5s2m", "1d2d"] {
            assert_eq!(DurationS::parse(t), Err(DurationError::UnitOrder { text: t.to_string() }), "{t:?}");
        }
        assert_eq!(DurationS::parse("1d2h3m4s"), Ok(DurationS(93_784)));
        assert_eq!(DurationS::parse("0h5m"), Ok(DurationS(300)));
    }

    #[test]
    fn rejects_bare_numbers_and_unknown_units() {
        assert!(matches!(DurationS::parse("20"), Err(DurationError::BadUnit { .. })));
        assert!(matches!(DurationS::parse("20x"), Err(DurationError::UnknownUnit { .. })));
        assert!(matches!(DurationS::parse("m"), Err(DurationError::BadUnit { .. })));
        assert!(matches!(DurationS::parse(""), Err(DurationError::Empty)));
        assert!(matches!(
            DurationS::parse("99999999999999999999s"),
            Err(DurationError::Overflow { .. })
        ));
    }

    /// Operator trial 17: `window = "20M"` was told it "needs a unit after each number".
    #[test]
    fn an_unknown_unit_is_named_as_written_with_the_accepted_units() {
        let msg = |t: &str| DurationS::parse(t).unwrap_err().to_string();
        assert_eq!(
            msg("20M"),
            "duration \"20M\": unit \"M\" is not one of s, m, h, d (units are lower-case)"
        );
        assert_eq!(
            msg("1H30m"),
            "duration \"1H30m\": unit \"H\" is not one of s, m, h, d (units are lower-case)"
        );
        assert_eq!(msg("20min"), "duration \"20min\": unit \"min\" is not one of s, m, h, d");
        assert_eq!(msg("20x"), "duration \"20x\": unit \"x\" is not one of s, m, h, d");
        assert!(msg("20").contains("needs a unit after each number"), "{}", msg("20"));
    }

    #[test]
    fn display_round_trips() {
        for s in [0, 1, 59, 60, 61, 3600, 5400, 86_400, 90_061] {
            let d = DurationS(s);
            assert_eq!(DurationS::parse(&d.to_string()), Ok(d), "{d}");
        }
    }
}
