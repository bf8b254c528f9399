//! Who acts: the per-process instance id written on every audit fact of a system transition
//! (claim, takeover, retry, failure, complete, expire), and the claim token's
//! fingerprint written next to it (the token itself is a capability and is never stored twice).

use sha2::{Digest, Sha256};

/// Longest instance id (`RAKUTEN_POLL_INSTANCE_ID`), in bytes.
pub const MAX_INSTANCE_ID_LEN: usize = 64;

/// `<hostname>-<pid>-<6 random hex>`: distinct per process even when two share a host and a
/// recycled pid. The host name comes from `/proc/sys/kernel/hostname` or `HOSTNAME`, `host`
/// when neither is readable; it is cut so the whole id stays within [`MAX_INSTANCE_ID_LEN`].
pub fn default_instance_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| {
            h.trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
                .take(40)
                .collect::<String>()
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    let random: u32 = rand::random::<u32>() & 0x00ff_ffff;
    format!("{host}-{}-{random:06x}", std::process::id())
}

/// Checks a configured instance id: 1–64 printable ASCII characters without spaces.
///
/// # Errors
/// A message naming the rule.
pub fn parse_instance_id(s: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > MAX_INSTANCE_ID_LEN || !s.chars().all(|c| c.is_ascii_graphic()) {
        return Err(format!(
            "the instance id must be 1-{MAX_INSTANCE_ID_LEN} printable ASCII characters without spaces"
        ));
    }
    Ok(s.to_owned())
}

/// The first 8 hex digits of the SHA-256 of a claim token: enough to tell two claims of one
/// item apart in its audit trail, useless for finishing the claim.
pub fn claim_fingerprint(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest[..4].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_is_the_first_8_hex_of_the_sha256() {
        // sha256("abc") = ba7816bf…
        assert_eq!(claim_fingerprint("abc"), "ba7816bf");
    }

    #[test]
    fn the_default_instance_id_is_host_pid_hex_and_parses() {
        let id = default_instance_id();
        let pid = format!("-{}-", std::process::id());
        assert!(id.contains(&pid), "{id}");
        assert_eq!(parse_instance_id(&id), Ok(id.clone()));
        assert_ne!(id, default_instance_id(), "two calls share a random part");
    }

    #[test]
    fn a_bad_instance_id_is_refused() {
        assert!(parse_instance_id("").is_err());
        assert!(parse_instance_id("a b").is_err());
        assert!(parse_instance_id(&"x".repeat(65)).is_err());
    }
}
