//! Cutting text to a byte cap without splitting a character.

/// Cuts `s` to at most `cap` bytes on a character boundary. Returns the prefix and whether it cut.
pub fn truncate_str(s: &str, cap: usize) -> (&str, bool) {
    if s.len() <= cap {
        return (s, false);
    }
    let mut end = cap;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (&s[..end], true)
}

/// Makes a snippet of at most `cap` bytes from a raw line, around the match at
/// `match_start..match_end`.
///
/// The line terminator (`\n` or `\r\n`) is dropped. A line that fits is returned whole; a longer
/// one yields a window that starts a little before the match, so the match itself is shown rather
/// than the line's start. Window edges are moved onto UTF-8 boundaries, and bytes that are not
/// UTF-8 are replaced with U+FFFD, never dropped; the result is cut again if replacement made it
/// grow past `cap`. Returns the snippet and whether anything was cut.
pub fn snippet_window(
    line: &[u8],
    match_start: usize,
    match_end: usize,
    cap: usize,
) -> (String, bool) {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.len() <= cap {
        return match std::str::from_utf8(line) {
            Ok(s) => (s.to_owned(), false),
            Err(_) => {
                let s = String::from_utf8_lossy(line);
                let (cut, truncated) = truncate_str(&s, cap);
                (cut.to_owned(), truncated)
            }
        };
    }
    let match_start = match_start.min(line.len());
    let match_len = match_end.saturating_sub(match_start).min(cap);
    // Show a quarter of the spare room before the match and the rest after it.
    let lead = (cap - match_len) / 4;
    let mut start = match_start.saturating_sub(lead);
    let mut end = (start + cap).min(line.len());
    if end - start < cap {
        start = end.saturating_sub(cap);
    }
    // Step off continuation bytes so no character is split at either edge.
    while start < end && start > 0 && is_continuation(line[start]) {
        start += 1;
    }
    while end > start && end < line.len() && is_continuation(line[end]) {
        end -= 1;
    }
    let s = String::from_utf8_lossy(&line[start..end]);
    let (cut, _) = truncate_str(&s, cap);
    (cut.to_owned(), true)
}

fn is_continuation(b: u8) -> bool {
    b & 0b1100_0000 == 0b1000_0000
}
