//! Free text a person types and another person reads later: an operator's reason. It is stored in
//! the audit and shown on the console and in `order-gateway ops` tables, so what would act on the
//! reader's screen instead of being read is refused (an escape sequence in a
//! console reason would clear the terminal of the next operator who runs `ops show`).

use crate::ids::is_invisible;

/// Whether `c` is a bidirectional embedding, override or isolate (U+202A–U+202E, U+2066–U+2069):
/// it reorders how the text after it is displayed ("ok \u{202e}gnp.exe" reads "ok exe.png").
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Longest `reason` of an operator action on the gateway, characters.
pub const MAX_REASON_CHARS: usize = 1000;

/// Checks a required reason and returns it trimmed.
///
/// Refused, with the message given: nothing but whitespace or invisible characters ("reason is
/// required"); more than `max_chars` characters; a control character other than a line break or a
/// tab; a bidirectional control ([`is_bidi_control`]). Any other Unicode text (Japanese, emoji)
/// is taken as it is, with its line breaks (CR LF, CR) made LF.
///
/// # Errors
/// The message for the caller's 422.
pub fn reason(text: &str, max_chars: usize) -> Result<String, String> {
    let r = text.trim();
    // A combining mark alone has nothing to sit on: "\u{301}" is an accent over nothing.
    if r.chars()
        .all(|c| c.is_whitespace() || is_invisible(c) || is_nonspacing_mark(c))
    {
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
    // A browser's form sends line breaks as CR LF; stored and shown as one kind.
    Ok(r.replace("\r\n", "\n").replace('\r', "\n"))
}

pub(crate) fn is_nonspacing_mark(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    matches!(
        c.general_category(),
        GeneralCategory::NonspacingMark | GeneralCategory::EnclosingMark
    )
}

/// JSON text (as `serde_json` writes it, or an intent's text as received) with every raw control
/// character, every bidirectional control and the line and paragraph separators inside a string
/// written as `\uXXXX` escapes. `serde_json` escapes only U+0000–U+001F inside strings, so a
/// stored U+009B (a terminal's one-byte CSI) or U+202E reached the terminal raw through
/// `ops … --json`. Outside strings JSON text is ASCII structure and whitespace (tabs
/// and carriage returns included), left as it is, so the result is the same JSON value.
pub fn json_printable(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if !in_string {
            in_string = c == '"';
            out.push(c);
            continue;
        }
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '"' {
            in_string = false;
        }
        if c.is_control() || is_bidi_control(c) || matches!(c, '\u{2028}' | '\u{2029}') {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
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
        assert_eq!(reason("a\r\nb\rc", 1000).unwrap(), "a\nb\nc");
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
    fn a_reason_of_characters_that_draw_nothing_is_blank() {
        // Each alone draws nothing, so none is a reason.
        for blank in [
            "\u{3164}",
            "\u{115f}",
            "\u{1160}",
            "\u{ffa0}",
            "\u{2800}",
            "\u{fe0f}",
            "\u{301}",
            "\u{34f}",
            "\u{17b4}",
            " \u{3164}\u{2800} ",
        ] {
            assert_eq!(
                reason(blank, 1000).unwrap_err(),
                "reason is required",
                "{blank:?}"
            );
        }
        // ... while the same characters inside readable text are kept.
        assert_eq!(reason("e\u{301} ok", 1000).unwrap(), "e\u{301} ok");
        assert_eq!(reason("☺\u{fe0f}", 1000).unwrap(), "☺\u{fe0f}");
    }

    #[test]
    fn json_printable_escapes_what_serde_json_leaves_raw_and_stays_the_same_json() {
        let v = serde_json::json!({"reason": "a\u{9b}2J b\u{202e}c\u{85}d\u{2028}e\u{7f}\nf 日本"});
        let text = json_printable(&serde_json::to_string_pretty(&v).unwrap());
        assert!(
            text.contains(r"a\u009b2J b\u202ec\u0085d\u2028e\u007f\nf 日本"),
            "{text}"
        );
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'));
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), v);
        // An intent's text as received may space its tokens with tabs and carriage returns: they
        // stay, and an escaped quote does not end a string.
        let sent = "{\t\"a\" :\r\n\"x\\\"\u{202e}\"}";
        let text = json_printable(sent);
        assert_eq!(text, "{\t\"a\" :\r\n\"x\\\"\\u202e\"}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap()["a"],
            "x\"\u{202e}"
        );
    }

    #[test]
    fn printable_writes_out_what_would_act_on_a_terminal() {
        assert_eq!(
            printable("x\u{1b}[2J\nok \u{202e}y"),
            "x\\u{1b}[2J\nok \\u{202e}y"
        );
    }
}
