//! Distinct made-up words for tests that need many different index terms.

/// A word of letters only (the tokenizer drops digits), `prefix` followed by
/// `i` written in base 26: distinct for each `i`.
pub fn word(prefix: &str, i: u64) -> String {
    let mut out = String::from(prefix);
    let mut n = i;
    loop {
        out.push(char::from(b'a' + (n % 26) as u8));
        n /= 26;
        if n == 0 {
            return out;
        }
    }
}
