//! String formats (kube-openapi's strfmt registry, restricted to the formats
//! apiextensions-apiserver supports; unsupported formats are stripped).

use regex::Regex;
use std::sync::OnceLock;

/// Formats supported for string (or untyped) schemas, normalized (`-` removed).
const SUPPORTED_STRING_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "k8sshortname",
    "k8slongname",
];

pub(crate) fn normalize(name: &str) -> String {
    name.replace('-', "")
}

/// StripUnsupportedFormatsPostProcessor: returns the format the validator sees.
pub(crate) fn strip_unsupported(format: &str, vtypes: &[String]) -> String {
    if format.is_empty() {
        return String::new();
    }
    let schema_type = if vtypes.len() == 1 {
        vtypes[0].as_str()
    } else {
        ""
    };
    let keep = match schema_type {
        "" | "string" => SUPPORTED_STRING_FORMATS.contains(&normalize(format).as_str()),
        "integer" => format == "int32" || format == "int64",
        "number" => format == "float" || format == "double",
        _ => false,
    };
    if keep {
        format.to_string()
    } else {
        String::new()
    }
}

/// Whether the strfmt registry knows the (non-normalized) format name.
pub(crate) fn is_known(format: &str) -> bool {
    !format.is_empty() && SUPPORTED_STRING_FORMATS.contains(&normalize(format).as_str())
}

macro_rules! re {
    ($name:ident, $pat:expr) => {
        fn $name() -> &'static Regex {
            static R: OnceLock<Regex> = OnceLock::new();
            R.get_or_init(|| Regex::new($pat).expect("static regex"))
        }
    };
}

re!(
    rx_hostname,
    r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9\-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$"
);
re!(
    rx_uuid,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
);
re!(
    rx_uuid3,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
);
re!(
    rx_uuid4,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
);
re!(
    rx_uuid5,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
);
re!(
    rx_creditcard,
    r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|(222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]|2720)[0-9]{12}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35[0-9]{3})[0-9]{11}|6[27][0-9]{14})$"
);
re!(rx_isbn10, r"^(?:[0-9]{9}X|[0-9]{10})$");
re!(rx_isbn13, r"^(?:[0-9]{13})$");
re!(rx_hexcolor, r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$");
re!(
    rx_rgbcolor,
    r"^rgb\([\t\n\f\r ]*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])[\t\n\f\r ]*,[\t\n\f\r ]*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])[\t\n\f\r ]*,[\t\n\f\r ]*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])[\t\n\f\r ]*\)$"
);
re!(
    rx_base64,
    r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$"
);
re!(rx_ssn, r"^[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}$");
re!(rx_ws_minus, r"[\t\n\f\r \-]+");
re!(rx_short_name, r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
re!(
    rx_long_name,
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
);
re!(
    rx_time,
    r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$"
);
re!(rx_duration_part, r"(([0-9]+)[\t\n\f\r ]*([A-Za-zµ]+))");

/// Validates `s` against a known format (any spelling; `-` ignored).
pub(crate) fn validates(format: &str, s: &str) -> bool {
    match normalize(format).as_str() {
        "bsonobjectid" => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => is_request_uri(s),
        "email" => is_email(s),
        "hostname" => is_hostname(s),
        "ipv4" => parse_ip(s, true).is_some() && s.contains('.'),
        "ipv6" => parse_ip(s, false).is_some() && s.contains(':'),
        "cidr" => is_cidr(s),
        "mac" => is_mac(s),
        "uuid" => rx_uuid().is_match(s),
        "uuid3" => rx_uuid3().is_match(s),
        "uuid4" => rx_uuid4().is_match(s),
        "uuid5" => rx_uuid5().is_match(s),
        "isbn" => is_isbn10(s) || is_isbn13(s),
        "isbn10" => is_isbn10(s),
        "isbn13" => is_isbn13(s),
        "creditcard" => is_creditcard(s),
        "ssn" => s.len() == 11 && rx_ssn().is_match(s),
        "hexcolor" => rx_hexcolor().is_match(s),
        "rgbcolor" => rx_rgbcolor().is_match(s),
        "byte" => rx_base64().is_match(s),
        "password" => true,
        "date" => is_date(s),
        "datetime" => is_datetime(s),
        "duration" => is_duration(s),
        "k8sshortname" => s.len() <= 63 && rx_short_name().is_match(s),
        "k8slongname" => s.len() <= 253 && rx_long_name().is_match(s),
        _ => true,
    }
}

fn is_hostname(s: &str) -> bool {
    rx_hostname().is_match(s) && s.len() <= 255 && s.split('.').all(|p| p.len() <= 63)
}

fn is_isbn10(s: &str) -> bool {
    let s = rx_ws_minus().replace_all(s, "");
    if !rx_isbn10().is_match(&s) {
        return false;
    }
    let b = s.as_bytes();
    let mut sum: i32 = 0;
    for (i, c) in b.iter().take(9).enumerate() {
        sum += (i as i32 + 1) * (*c - b'0') as i32;
    }
    sum += if b[9] == b'X' {
        100
    } else {
        10 * (b[9] - b'0') as i32
    };
    sum % 11 == 0
}

fn is_isbn13(s: &str) -> bool {
    let s = rx_ws_minus().replace_all(s, "");
    if !rx_isbn13().is_match(&s) {
        return false;
    }
    let b = s.as_bytes();
    let mut sum: i32 = 0;
    for (i, c) in b.iter().take(12).enumerate() {
        sum += if i % 2 == 0 { 1 } else { 3 } * (*c - b'0') as i32;
    }
    (b[12] - b'0') as i32 - ((10 - sum % 10) % 10) == 0
}

fn is_creditcard(s: &str) -> bool {
    let s = rx_ws_minus().replace_all(s, "");
    if !rx_creditcard().is_match(&s) {
        return false;
    }
    let number: i64 = s.parse().unwrap_or(0);
    let (mut number, last) = (number / 10, number % 10);
    let mut sum = 0i64;
    let mut i = 0;
    while number > 0 {
        let mut d = number % 10;
        if i % 2 == 0 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
        number /= 10;
        i += 1;
    }
    (sum + last) % 10 == 0
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ => {
            if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 {
                29
            } else {
                28
            }
        }
    }
}

/// time.Parse("2006-01-02", s).
pub(crate) fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let mut v = 0u32;
        for &c in &b[r] {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + (c - b'0') as u32;
        }
        Some(v)
    };
    let (Some(y), Some(m), Some(d)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    (1..=12).contains(&m) && d >= 1 && d <= days_in_month(y as i64, m)
}

fn is_datetime(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    match rx_time().captures(parts[1]) {
        Some(c) => {
            let g = |i: usize| c.get(i).map(|m| m.as_str()).unwrap_or("");
            g(1) <= "23" && g(2) <= "59" && g(3) <= "59"
        }
        None => false,
    }
}

/// time.ParseDuration, falling back to the lenient strfmt matcher.
fn is_duration(s: &str) -> bool {
    if go_parse_duration(s) {
        return true;
    }
    const UNITS: &[&[&str]] = &[
        &["ns", "nano"],
        &["us", "µs", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    let mut ok = false;
    for c in rx_duration_part().captures_iter(s) {
        if c[2].parse::<i64>().is_err() {
            return false;
        }
        let unit = c[3].trim().to_lowercase();
        for variants in UNITS {
            let last = variants.len() - 1;
            for (i, v) in variants.iter().enumerate() {
                if (i == last && unit.starts_with(v)) || v.eq_ignore_ascii_case(&unit) {
                    ok = true;
                }
            }
        }
    }
    ok
}

fn go_parse_duration(orig: &str) -> bool {
    let mut s = orig;
    if s.starts_with(['-', '+']) {
        s = &s[1..];
    }
    if s == "0" {
        return true;
    }
    if s.is_empty() {
        return false;
    }
    let mut total: f64 = 0.0;
    while !s.is_empty() {
        let b = s.as_bytes();
        if !(b[0] == b'.' || b[0].is_ascii_digit()) {
            return false;
        }
        let int_len = b.iter().take_while(|c| c.is_ascii_digit()).count();
        let int_part = &s[..int_len];
        if int_len > 0
            && int_part
                .parse::<u64>()
                .map(|v| v > (1u64 << 63))
                .unwrap_or(true)
        {
            return false;
        }
        let mut v: f64 = if int_len > 0 {
            int_part.parse().unwrap_or(0.0)
        } else {
            0.0
        };
        s = &s[int_len..];
        let mut post = false;
        if s.starts_with('.') {
            s = &s[1..];
            let fl = s.bytes().take_while(|c| c.is_ascii_digit()).count();
            if fl > 0 {
                post = true;
                v += format!("0.{}", &s[..fl]).parse::<f64>().unwrap_or(0.0);
            }
            s = &s[fl..];
        }
        if int_len == 0 && !post {
            return false;
        }
        let ul = s
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map(|(i, _)| i)
            .unwrap_or(s.len());
        if ul == 0 {
            return false;
        }
        let unit: f64 = match &s[..ul] {
            "ns" => 1.0,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return false,
        };
        s = &s[ul..];
        total += v * unit;
        // int64 nanoseconds (2^63 is the same f64 for both signs)
        if total > 9223372036854775807.0 {
            return false;
        }
    }
    true
}

/// net.ParseIP (sloppy = k8s netutils.ParseIPSloppy, leading zeros allowed in IPv4).
/// Returns the address length (4 or 16).
pub(crate) fn parse_ip(s: &str, sloppy: bool) -> Option<usize> {
    for c in s.chars() {
        match c {
            '.' => return parse_ipv4(s, sloppy).map(|_| 4),
            ':' => return parse_ipv6(s, sloppy).map(|_| 16),
            _ => {}
        }
    }
    None
}

fn parse_ipv4(s: &str, sloppy: bool) -> Option<[u8; 4]> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut out = [0u8; 4];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if !sloppy && p.len() > 1 && p.starts_with('0') {
            return None;
        }
        let v: u32 = p.parse().ok()?;
        if v > 255 {
            return None;
        }
        out[i] = v as u8;
    }
    Some(out)
}

fn parse_ipv6(s: &str, sloppy: bool) -> Option<()> {
    let (head, tail, has_ellipsis) = match s.find("::") {
        Some(i) => (&s[..i], &s[i + 2..], true),
        None => (s, "", false),
    };
    if has_ellipsis && tail.contains("::") {
        return None;
    }
    let groups = |part: &str, allow_v4: bool| -> Option<usize> {
        if part.is_empty() {
            return Some(0);
        }
        let fields: Vec<&str> = part.split(':').collect();
        let mut n = 0;
        for (i, f) in fields.iter().enumerate() {
            if allow_v4 && i == fields.len() - 1 && f.contains('.') {
                parse_ipv4(f, sloppy)?;
                n += 2;
                continue;
            }
            if f.is_empty() || f.len() > 4 || !f.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            n += 1;
        }
        Some(n)
    };
    if has_ellipsis {
        let h = groups(head, false)?;
        let t = groups(tail, true)?;
        if h + t > 7 {
            return None;
        }
    } else if groups(head, true)? != 8 {
        return None;
    }
    Some(())
}

fn is_cidr(s: &str) -> bool {
    let Some((addr, mask)) = s.split_once('/') else {
        return false;
    };
    let Some(len) = parse_ip(addr, true) else {
        return false;
    };
    if mask.is_empty() || mask.len() > 10 || !mask.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    mask.parse::<usize>().map(|n| n <= 8 * len).unwrap_or(false)
}

/// net.ParseMAC.
fn is_mac(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 14 {
        return false;
    }
    let hex2 = |x: &[u8]| x.len() == 2 && x.iter().all(|c| c.is_ascii_hexdigit());
    if b[2] == b':' || b[2] == b'-' {
        if !(b.len() + 1).is_multiple_of(3) {
            return false;
        }
        let n = (b.len() + 1) / 3;
        if n != 6 && n != 8 && n != 20 {
            return false;
        }
        let sep = b[2];
        (0..n).all(|i| hex2(&b[i * 3..i * 3 + 2]) && (i == n - 1 || b[i * 3 + 2] == sep))
    } else if b[4] == b'.' {
        if !(b.len() + 1).is_multiple_of(5) {
            return false;
        }
        let n = 2 * (b.len() + 1) / 5;
        if n != 6 && n != 8 && n != 20 {
            return false;
        }
        (0..n / 2).all(|i| {
            let g = &b[i * 5..i * 5 + 4];
            g.iter().all(|c| c.is_ascii_hexdigit()) && (i == n / 2 - 1 || b[i * 5 + 4] == b'.')
        })
    } else {
        false
    }
}

/// url.ParseRequestURI.
fn is_request_uri(s: &str) -> bool {
    if s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    if s.is_empty() {
        return false;
    }
    if s == "*" {
        return true;
    }
    // scheme
    let mut scheme = "";
    let mut rest = s;
    for (i, c) in s.char_indices() {
        if c.is_ascii_alphabetic() {
            continue;
        }
        if c.is_ascii_digit() || c == '+' || c == '-' || c == '.' {
            if i == 0 {
                break;
            }
            continue;
        }
        if c == ':' {
            if i == 0 {
                return false; // missing protocol scheme
            }
            scheme = &s[..i];
            rest = &s[i + 1..];
        }
        break;
    }
    let rest = match rest.find('?') {
        Some(i) => &rest[..i],
        None => rest,
    };
    if !rest.starts_with('/') {
        // opaque only with a scheme
        return !scheme.is_empty();
    }
    let mut path = rest;
    if !scheme.is_empty() && rest.starts_with("//") {
        let after = &rest[2..];
        let end = after.find('/').unwrap_or(after.len());
        let authority = &after[..end];
        path = &after[end..];
        if !valid_authority(authority) {
            return false;
        }
    }
    valid_escapes(path)
}

fn valid_escapes(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if i + 2 >= b.len() || !b[i + 1].is_ascii_hexdigit() || !b[i + 2].is_ascii_hexdigit() {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

fn valid_authority(a: &str) -> bool {
    let (userinfo, host) = match a.rfind('@') {
        Some(i) => (Some(&a[..i]), &a[i + 1..]),
        None => (None, a),
    };
    if let Some(u) = userinfo
        && !u
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c) || !c.is_ascii())
    {
        return false;
    }
    let port_ok = |p: &str| {
        p.is_empty() || (p.starts_with(':') && p[1..].bytes().all(|b| b.is_ascii_digit()))
    };
    let hostname = if let Some(stripped) = host.strip_prefix('[') {
        let Some(end) = stripped.find(']') else {
            return false;
        };
        if !port_ok(&stripped[end + 1..]) {
            return false;
        }
        &stripped[..end]
    } else if let Some(i) = host.rfind(':') {
        if !port_ok(&host[i..]) {
            return false;
        }
        &host[..i]
    } else {
        host
    };
    if !valid_escapes(hostname) {
        return false;
    }
    hostname.chars().all(|c| {
        !c.is_ascii() || c.is_ascii_alphanumeric() || "-_.~!$&'()*+,;=:[]<>\"%".contains(c)
    })
}

fn is_atext(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c) || !c.is_ascii()
}

fn is_dot_atom(s: &str) -> bool {
    !s.is_empty()
        && s.split('.')
            .all(|p| !p.is_empty() && p.chars().all(is_atext))
}

fn is_quoted_string(s: &str) -> bool {
    if s.len() < 2 || !s.starts_with('"') || !s.ends_with('"') {
        return false;
    }
    let inner = &s[1..s.len() - 1];
    let mut esc = false;
    for c in inner.chars() {
        if esc {
            esc = false;
            continue;
        }
        match c {
            '\\' => esc = true,
            '"' => return false,
            c if (c as u32) < 0x20 && c != '\t' => return false,
            _ => {}
        }
    }
    !esc
}

fn is_addr_spec(s: &str) -> bool {
    let Some(at) = s.rfind('@') else {
        return false;
    };
    let (local, domain) = (&s[..at], &s[at + 1..]);
    let local_ok = is_dot_atom(local) || is_quoted_string(local);
    let domain_ok = is_dot_atom(domain)
        || (domain.starts_with('[')
            && domain.ends_with(']')
            && domain.len() >= 2
            && domain[1..domain.len() - 1]
                .chars()
                .all(|c| (c as u32) > 0x20 && c != '[' && c != ']' && c != '\\'));
    local_ok && domain_ok
}

/// Approximation of net/mail.ParseAddress: `addr-spec` or `display-name <addr-spec>`.
fn is_email(s: &str) -> bool {
    let s = s.trim_matches(|c| c == ' ' || c == '\t');
    if let Some(lt) = s.find('<') {
        let Some(body) = s[lt + 1..].trim_end().strip_suffix('>') else {
            return false;
        };
        let name = s[..lt].trim();
        let name_ok = name.is_empty()
            || is_quoted_string(name)
            || name
                .split([' ', '\t'])
                .filter(|w| !w.is_empty())
                .all(|w| w.chars().all(|c| is_atext(c) || c == '.'));
        name_ok && is_addr_spec(body)
    } else {
        is_addr_spec(s)
    }
}
