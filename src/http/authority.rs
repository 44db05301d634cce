//! Authorities as routes know them: one spelling for each host, so that a
//! route cannot be missed (and its pin bypassed) by writing the host
//! another way.

use std::net::{Ipv4Addr, Ipv6Addr};

/// `authority` (`host` or `host:port`, perhaps after `userinfo@`) in its
/// one spelling: no userinfo; the host in lower case without a trailing
/// dot, an IPv4 address in dotted decimal whatever form it came in (`10.7`,
/// `0x0a000007`, `012.0.0.7`: the forms `inet_aton` and the URL standard
/// accept, or IPv4-mapped IPv6), an IPv6 address compressed; the port as
/// a number (`07000` is `7000`).
pub(super) fn normalize(authority: &str) -> String {
    let authority = authority.rsplit_once('@').map_or(authority, |(_, rest)| rest);
    let (host, port) = split(authority);
    let host = normalize_host(host);
    match port {
        Some(port) => match port.parse::<u16>() {
            Ok(port) => format!("{host}:{port}"),
            Err(_) => format!("{host}:{port}"),
        },
        None => host,
    }
}

/// The host part of an authority in its one spelling.
pub(super) fn host_of(normalized: &str) -> &str {
    split(normalized).0
}

/// The host alone, normalized.
pub(super) fn normalize_host(host: &str) -> String {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        if let Ok(v6) = inner.parse::<Ipv6Addr>() {
            return match v6.to_ipv4_mapped() {
                Some(v4) => v4.to_string(),
                None => format!("[{v6}]"),
            };
        }
    }
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    match ipv4(&host) {
        Some(v4) => v4.to_string(),
        None => host,
    }
}

/// The host and the port of an authority (a bracketed IPv6 host keeps its
/// brackets).
fn split(authority: &str) -> (&str, Option<&str>) {
    if authority.starts_with('[') {
        return match authority.rfind("]:") {
            Some(end) => (&authority[..=end], Some(&authority[end + 2..])),
            None => (authority, None),
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, Some(port)),
        _ => (authority, None),
    }
}

/// An IPv4 address in any of `inet_aton`'s forms: one to four parts, each
/// decimal, octal (leading 0) or hex (0x), the last filling the bytes left.
fn ipv4(host: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = host.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for part in &parts {
        values.push(number(part)?);
    }
    let (last, leading) = values.split_last()?;
    if leading.iter().any(|&v| v > 255) {
        return None;
    }
    let room = 8 * (4 - leading.len() as u32);
    if room < 32 && *last >= 1u64 << room {
        return None;
    }
    let mut address = *last;
    for (i, &v) in leading.iter().enumerate() {
        address |= v << (24 - 8 * i as u32);
    }
    u32::try_from(address).ok().map(Ipv4Addr::from)
}

fn number(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
        (hex, 16)
    } else if part.len() > 1 && part.starts_with('0') {
        (&part[1..], 8)
    } else {
        (part, 10)
    };
    if digits.is_empty() {
        // "0x" alone is 0, as inet_aton reads it.
        return (radix == 16).then_some(0);
    }
    u64::from_str_radix(digits, radix)
        .ok()
        .filter(|&v| v <= u64::from(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn every_spelling_of_a_host_is_one_authority() {
        for (spelled, one) in [
            ("API.internal", "api.internal"),
            ("api.internal.", "api.internal"),
            ("Api.Internal.:7000", "api.internal:7000"),
            ("10.7", "10.0.0.7"),
            ("10.7:7000", "10.0.0.7:7000"),
            ("0x0a000007", "10.0.0.7"),
            ("012.0.0.7", "10.0.0.7"),
            ("10.0.7", "10.0.0.7"),
            ("167772167", "10.0.0.7"),
            ("10.0.0.7.", "10.0.0.7"),
            ("[0:0::1]:80", "[::1]:80"),
            ("[::FFFF:10.0.0.7]", "10.0.0.7"),
            ("[::ffff:a00:7]:7000", "10.0.0.7:7000"),
            ("api.internal:07000", "api.internal:7000"),
            ("user@api.internal:7000", "api.internal:7000"),
            ("user:secret@API.internal", "api.internal"),
        ] {
            assert_eq!(normalize(spelled), one, "{spelled}");
        }
        // Not addresses: names as they are (lower-cased).
        for name in ["10.0.0.256", "1.2.3.4.5", "0x1g", "host-10"] {
            assert_eq!(normalize(name), name.to_ascii_lowercase(), "{name}");
        }
    }
}
