//! Free text a person types and another person reads later: an operator's reason. It is stored in
//! the audit and shown on the console and in `order-gateway ops` tables, so what would act on the
//! reader's screen instead of being read is refused (helper-50's finding: an escape sequence in a
//! console reason cleared the terminal of the next operator who ran `ops show`).

use crate::ids::is_invisible;

/// Whether `c` is a bidirectional embedding, override or isolate (U+202A–U+202E, U+2066–U+2069):
/// it reorders how the text after it is displayed ("ok \u{202e}gnp.exe" reads "ok exe.png").
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Checks a required reason and returns it trimmed.
///
/// Refused, with the message given: nothing but whitespace or invisible characters ("reason is
/// required"); more than `max_chars` characters; a control character other than a line break or a
/// tab; a bidirectional control ([`is_bidi_control`]). Any other Unicode text (Japanese, emoji)
/// is taken as it is.
///
/// # Errors
/// The message for the caller's 422.
pub fn reason(text: &str, max_chars: usize) -> Result<String, String> {
    let r = text.trim();
    if r.chars().all(|c| c.is_whitespace() || is_invisible(c)) {
        return Err("reason is required".into());
    }
    if r.chars().count() > max_chars {
        return Err(format!("reason is longer than {max_chars} characters"));
    }
    if r.chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err("reason contains control characters".into());
    }
    if let Some(c) = r.chars().find(|&c| is_bidi_control(c)) {
        return Err(format!(
            "reason contains the bidirectional control U+{:04X}, which reorders how it reads",
            u32::from(c)
        ));
    }
    Ok(r.to_owned())
}

/// `s` with every control character but the line break, and every bidirectional control, written
/// out as `\u{…}`: for a terminal that shows text stored before [`reason`] refused them.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if (c.is_control() && c != '\n') || is_bidi_control(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_trimmed_and_any_readable_text_is_taken() {
        assert_eq!(
            reason("  在庫切れを確認 👨‍👩‍👧\n2行目\t", 1000).unwrap(),
            "在庫切れを確認 👨‍👩‍👧\n2行目"
        );
    }

    #[test]
    fn blank_long_control_and_bidi_reasons_are_refused() {
        assert_eq!(
            reason(" \u{200b}\u{200b} ", 1000).unwrap_err(),
            "reason is required"
        );
        assert_eq!(reason("", 1000).unwrap_err(), "reason is required");
        assert_eq!(
            reason("abcd", 3).unwrap_err(),
            "reason is longer than 3 characters"
        );
        assert_eq!(
            reason("x\u{7}\u{1b}[2J", 1000).unwrap_err(),
            "reason contains control characters"
        );
        assert_eq!(
            reason("ok \u{202e} gnp.exe", 1000).unwrap_err(),
            "reason contains the bidirectional control U+202E, which reorders how it reads"
        );
        assert!(reason("a\u{2066}b", 1000).is_err());
    }

    #[test]
    fn printable_writes_out_what_would_act_on_a_terminal() {
        assert_eq!(
            printable("x\u{1b}[2J\nok \u{202e}y"),
            "x\\u{1b}[2J\nok \\u{202e}y"
        );
    }
}
