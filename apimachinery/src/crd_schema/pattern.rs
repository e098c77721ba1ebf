//! `pattern` support: Go RE2 syntax translated to the `regex` crate.
//!
//! Differences handled here:
//! * `\d \w \s \b` (and negations) are ASCII-only in Go, Unicode in `regex`:
//!   rewritten to explicit ASCII classes / `(?-u:\b)`.
//! * `\Q...\E` literal quoting is expanded (unsupported by `regex`).
//! * `[` inside a class is a literal in Go (nested class in `regex`), as are
//!   `&&` / `~~` (class set operators in `regex`): escaped.
//! * Go rejects flags other than `imsU` and repeat counts above 1000: mirrored.
//!
//! The compiled program size is limited (hostile patterns). A pattern that does
//! not compile yields a [`PatternError`] worded like Go's `regexp/syntax.Error`.

use super::REGEX_SIZE_LIMIT;
use regex::{Regex, RegexBuilder};

const MAX_REPEAT: u32 = 1000;

/// Why a pattern does not compile, as Go's `regexp/syntax.Error`: the error
/// code's text (e.g. `missing closing )`) and the offending part of the pattern.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("error parsing regexp: {code}: `{expr}`")]
pub(crate) struct PatternError {
    pub code: String,
    pub expr: String,
}

/// Compiles a Go regexp; the error is worded like Go's `regexp.Compile` error.
pub(crate) fn compile(pat: &str) -> Result<Regex, PatternError> {
    let translated = translate(pat).map_err(|(code, frag)| go_err(code, &frag))?;
    RegexBuilder::new(&translated)
        .octal(true)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .nest_limit(250)
        .build()
        .map_err(|e| map_err(e, pat, &translated))
}

fn go_err(code: &str, frag: &str) -> PatternError {
    PatternError {
        code: code.to_string(),
        expr: frag.to_string(),
    }
}

fn map_err(e: regex::Error, pat: &str, translated: &str) -> PatternError {
    match e {
        regex::Error::CompiledTooBig(_) => go_err("expression too large", pat),
        regex::Error::Syntax(msg) => {
            let last = msg.lines().last().unwrap_or("").trim();
            let what = last.strip_prefix("error: ").unwrap_or(last);
            // caret span (only meaningful when we did not rewrite the pattern)
            let frag = if translated == pat {
                caret_fragment(&msg, pat)
            } else {
                None
            };
            let frag = frag.unwrap_or_else(|| pat.to_string());
            let code = if what.contains("unclosed group") {
                return go_err("missing closing )", pat);
            } else if what.contains("unopened group") {
                return go_err("unexpected )", pat);
            } else if what.contains("unclosed character class") {
                "missing closing ]"
            } else if what.contains("repetition operator missing expression") {
                "missing argument to repetition operator"
            } else if what.contains("invalid character class range")
                || what.contains("invalid range")
            {
                "invalid character class range"
            } else if what.contains("escape sequence") || what.contains("unrecognized escape") {
                "invalid escape sequence"
            } else if what.contains("repetition quantifier") || what.contains("decimal") {
                "invalid repeat count"
            } else if what.contains("Unicode class") || what.contains("unicode class") {
                "invalid character class range"
            } else if what.contains("flag") {
                "invalid or unsupported Perl syntax"
            } else if what.contains("nest") {
                "expression nests too deeply"
            } else if what.contains("exceeds size limit") {
                return go_err("expression too large", pat);
            } else {
                what
            };
            go_err(code, &frag)
        }
        _ => go_err("invalid regular expression", pat),
    }
}

/// Extracts the text above the `^^^` marker of a regex-syntax error.
fn caret_fragment(msg: &str, pat: &str) -> Option<String> {
    if pat.contains('\n') {
        return None;
    }
    let lines: Vec<&str> = msg.lines().collect();
    let pos = lines.iter().position(|l| l.trim_start().starts_with('^'))?;
    let caret = lines[pos];
    let start = caret.find('^')?;
    let end = caret.rfind('^')? + 1;
    let pline = lines.get(pos.checked_sub(1)?)?;
    // the pattern line is indented by 4 spaces
    let chars: Vec<char> = pline.chars().collect();
    if end > chars.len() || start < 4 {
        return None;
    }
    Some(chars[start..end].iter().collect())
}

type TErr = (&'static str, String);

fn translate(pat: &str) -> Result<String, TErr> {
    let chars: Vec<char> = pat.chars().collect();
    let mut out = String::with_capacity(pat.len() + 16);
    let mut i = 0;
    let mut in_class = false;
    let mut class_start = 0usize; // index in chars just after '[' / '[^'
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            let Some(&n) = chars.get(i + 1) else {
                return Err(("trailing backslash at end of expression", String::new()));
            };
            if n == 'Q' {
                // literal text up to \E
                let mut j = i + 2;
                while j < chars.len() && !(chars[j] == '\\' && chars.get(j + 1) == Some(&'E')) {
                    let lit = chars[j];
                    if in_class {
                        if "\\[]^-&~".contains(lit) {
                            out.push('\\');
                        }
                        out.push(lit);
                    } else {
                        out.push_str(&regex::escape(&lit.to_string()));
                    }
                    j += 1;
                }
                i = if j < chars.len() { j + 2 } else { j };
                continue;
            }
            let rep: Option<&str> = if in_class {
                match n {
                    'd' => Some("0-9"),
                    'D' => Some("[^0-9]"),
                    'w' => Some("0-9A-Za-z_"),
                    'W' => Some("[^0-9A-Za-z_]"),
                    's' => Some("\\t\\n\\x0C\\r "),
                    'S' => Some("[^\\t\\n\\x0C\\r ]"),
                    _ => None,
                }
            } else {
                match n {
                    'd' => Some("[0-9]"),
                    'D' => Some("[^0-9]"),
                    'w' => Some("[0-9A-Za-z_]"),
                    'W' => Some("[^0-9A-Za-z_]"),
                    's' => Some("[\\t\\n\\x0C\\r ]"),
                    'S' => Some("[^\\t\\n\\x0C\\r ]"),
                    'b' => Some("(?-u:\\b)"),
                    'B' => Some("(?-u:\\B)"),
                    _ => None,
                }
            };
            match rep {
                Some(r) => out.push_str(r),
                None => {
                    out.push('\\');
                    out.push(n);
                }
            }
            i += 2;
            continue;
        }
        if in_class {
            match c {
                ']' if i > class_start => {
                    in_class = false;
                    out.push(']');
                }
                '[' => {
                    if chars.get(i + 1) == Some(&':') {
                        // POSIX class [:name:]
                        let rest: String = chars[i..].iter().collect();
                        if let Some(end) = rest.find(":]") {
                            let cls: String = rest[..end + 2].to_string();
                            out.push_str(&cls);
                            i += cls.chars().count();
                            continue;
                        }
                    }
                    out.push_str("\\[");
                }
                '&' | '~' if chars.get(i + 1) == Some(&c) => {
                    out.push('\\');
                    out.push(c);
                }
                _ => out.push(c),
            }
            i += 1;
            continue;
        }
        match c {
            '[' => {
                in_class = true;
                out.push('[');
                i += 1;
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                class_start = i;
                // a leading ']' is literal
                if chars.get(i) == Some(&']') {
                    out.push_str("\\]");
                    i += 1;
                }
                continue;
            }
            '(' if chars.get(i + 1) == Some(&'?') => {
                // flags or named group
                let mut j = i + 2;
                match chars.get(j) {
                    Some('P') | Some('<') => {}
                    _ => {
                        while j < chars.len() && chars[j] != ')' && chars[j] != ':' {
                            if !"imsU-".contains(chars[j]) {
                                let frag: String =
                                    chars[i..(j + 1).min(chars.len())].iter().collect();
                                return Err(("invalid or unsupported Perl syntax", frag));
                            }
                            j += 1;
                        }
                    }
                }
                out.push(c);
            }
            '{' => {
                // repeat count check
                let mut j = i + 1;
                let mut nums = vec![String::new()];
                while j < chars.len() && (chars[j].is_ascii_digit() || chars[j] == ',') {
                    if chars[j] == ',' {
                        nums.push(String::new());
                    } else if let Some(last) = nums.last_mut() {
                        last.push(chars[j]);
                    }
                    j += 1;
                }
                if chars.get(j) == Some(&'}') && !nums[0].is_empty() && nums.len() <= 2 {
                    let too_big = nums.iter().filter(|n| !n.is_empty()).any(|n| {
                        n.len() > 4 || n.parse::<u32>().map(|v| v > MAX_REPEAT).unwrap_or(true)
                    });
                    let bad_order = nums.len() == 2
                        && !nums[1].is_empty()
                        && nums[0].parse::<u32>().ok() > nums[1].parse::<u32>().ok();
                    if too_big || bad_order {
                        let frag: String = chars[i..=j].iter().collect();
                        return Err(("invalid repeat count", frag));
                    }
                    let s: String = chars[i..=j].iter().collect();
                    out.push_str(&s);
                    i = j + 1;
                    continue;
                }
                // not a repetition: a literal '{' in Go
                out.push_str("\\{");
            }
            '}' => out.push_str("\\}"),
            _ => out.push(c),
        }
        i += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_classes() {
        let r = compile(r"^\d+$").unwrap();
        assert!(r.is_match("123"));
        assert!(!r.is_match("١٢٣")); // Arabic-Indic digits: not \d in Go
        let r = compile(r"^[\w.]+$").unwrap();
        assert!(r.is_match("a_b.c"));
        assert!(!r.is_match("é"));
        assert!(compile(r"^\s$").unwrap().is_match(" "));
        assert!(!compile(r"^\s$").unwrap().is_match("\u{a0}"));
    }

    #[test]
    fn go_literals() {
        assert!(compile(r"^[[]$").unwrap().is_match("["));
        assert!(compile(r"^[a&&b]+$").unwrap().is_match("a&&b"));
        assert!(compile(r"^\Q*.+\E$").unwrap().is_match("*.+"));
        assert!(compile(r"^a{,2}$").unwrap().is_match("a{,2}"));
        assert!(compile(r"^[[:alpha:]]+$").unwrap().is_match("abc"));
    }

    #[test]
    fn go_errors() {
        let e = compile("+").unwrap_err();
        assert_eq!(e.code, "missing argument to repetition operator");
        assert_eq!(e.expr, "+");
        assert_eq!(
            e.to_string(),
            "error parsing regexp: missing argument to repetition operator: `+`"
        );
        assert_eq!(
            compile("(abc").unwrap_err().to_string(),
            "error parsing regexp: missing closing ): `(abc`"
        );
        assert_eq!(
            compile("a{1001}").unwrap_err().to_string(),
            "error parsing regexp: invalid repeat count: `{1001}`"
        );
        assert_eq!(
            compile(r"a\").unwrap_err().to_string(),
            "error parsing regexp: trailing backslash at end of expression: ``"
        );
        assert!(compile("(?x)a").is_err());
        assert!(compile("a{2,1}").is_err());
    }

    #[test]
    fn huge_pattern_rejected() {
        let p = "(((a{100}){100}){100})";
        assert!(compile(p).is_err());
    }
}
