//! Resource quantities (`100m`, `1Gi`, `2e3`) parsed into integers the way the scheduler
//! compares them: CPU in millicores, everything else in whole units rounded up.
//!
//! Owns only parsing; which resources exist and how they add up is `framework::resource`.

/// A quantity that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {0:?}"
    )]
    Syntax(String),
    #[error("quantity {0:?} is out of range")]
    Range(String),
}

/// The value of `s` times 1000, rounded up (towards +infinity).
pub fn parse_milli(s: &str) -> Result<i64, QuantityError> {
    scaled(s, 3)
}

/// The value of `s`, rounded up to a whole unit.
pub fn parse_value(s: &str) -> Result<i64, QuantityError> {
    scaled(s, 0)
}

/// `s` × 10^`extra_exp`, rounded up.
fn scaled(s: &str, extra_exp: i32) -> Result<i64, QuantityError> {
    let bad = || QuantityError::Syntax(s.to_owned());
    let t = s.trim();
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let num_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (num, suffix) = body.split_at(num_end);
    if num.is_empty() || num == "." || num.matches('.').count() > 1 {
        return Err(bad());
    }
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    // mantissa = digits as an integer, exp10 = -len(frac)
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err(QuantityError::Range(s.to_owned()));
    }
    let mut mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| bad())?
    };
    let mut exp10: i32 = -(frac_part.len() as i32) + extra_exp;
    let mut exp2: u32 = 0;
    match suffix {
        "" => {}
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" => exp2 = 10,
        "Mi" => exp2 = 20,
        "Gi" => exp2 = 30,
        "Ti" => exp2 = 40,
        "Pi" => exp2 = 50,
        "Ei" => exp2 = 60,
        other => {
            let e = other
                .strip_prefix(['e', 'E'])
                .ok_or_else(bad)?
                .parse::<i32>()
                .map_err(|_| bad())?;
            if !(-40..=40).contains(&e) {
                return Err(QuantityError::Range(s.to_owned()));
            }
            exp10 += e;
        }
    }
    let range = || QuantityError::Range(s.to_owned());
    mantissa = mantissa.checked_shl(exp2).ok_or_else(range)?;
    if mantissa >> 120 != 0 {
        return Err(range());
    }
    while exp10 > 0 {
        mantissa = mantissa.checked_mul(10).ok_or_else(range)?;
        exp10 -= 1;
    }
    let mut value = mantissa;
    if exp10 < 0 {
        let div = 10i128.checked_pow(exp10.unsigned_abs()).ok_or_else(range)?;
        value = mantissa / div;
        // Round up for positive values (towards +inf), as resource.Quantity's ScaledValue.
        if !neg && mantissa % div != 0 {
            value += 1;
        }
    }
    if neg {
        value = -value;
    }
    i64::try_from(value).map_err(|_| range())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_upstream() {
        let cases: &[(&str, i64, i64)] = &[
            ("1", 1000, 1),
            ("100m", 100, 1),
            ("0.5", 500, 1),
            ("1.5", 1500, 2),
            ("1Ki", 1024 * 1000, 1024),
            ("1Gi", (1 << 30) * 1000, 1 << 30),
            ("2k", 2_000_000, 2000),
            ("1e3", 1_000_000, 1000),
            ("1n", 1, 1),
            ("0", 0, 0),
            ("-1", -1000, -1),
        ];
        for (s, milli, value) in cases {
            assert_eq!(parse_milli(s).unwrap(), *milli, "{s}");
            assert_eq!(parse_value(s).unwrap(), *value, "{s}");
        }
        for bad in ["", "x", "1x", "1.2.3", "Mi", "1e"] {
            assert!(parse_value(bad).is_err(), "{bad}");
        }
        assert!(parse_value("1e40").is_err());
    }
}
