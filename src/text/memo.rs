//! A memo of what a function computes from a text, for the texts an observe meets
//! again: a conversation's turns, the facts near a new one.

/// Bytes of text a generation of the write path's memos holds.
pub(crate) const MEMO_BYTES: usize = 1 << 20;

/// Two generations of texts and their values: when the newer one holds `BYTES`
/// of text it becomes the older one (the older dropped), and a text found in the
/// older one moves to the newer. So the memo keeps at least the texts of the last
/// `BYTES` inserted, and those asked for since, in at most twice that much text
/// (plus the values); texts longer than `BYTES / 256` are not kept.
pub(crate) struct TextMemo<V, const BYTES: usize = MEMO_BYTES> {
    new: foldhash::HashMap<Box<str>, V>,
    old: foldhash::HashMap<Box<str>, V>,
    new_bytes: usize,
}

impl<V, const BYTES: usize> Default for TextMemo<V, BYTES> {
    fn default() -> Self {
        Self { new: foldhash::HashMap::default(), old: foldhash::HashMap::default(), new_bytes: 0 }
    }
}

impl<V: Clone, const BYTES: usize> TextMemo<V, BYTES> {
    /// The value kept for `text`, else `f(text)` (kept unless the text is long).
    pub(crate) fn get_or_insert_with(&mut self, text: &str, f: impl FnOnce(&str) -> V) -> V {
        if let Some(v) = self.new.get(text) {
            return v.clone();
        }
        if let Some((text, v)) = self.old.remove_entry(text) {
            self.insert_owned(text, v.clone());
            return v;
        }
        let v = f(text);
        self.insert(text, v.clone());
        v
    }

    /// Keeps `value` for `text` (unless the text is long).
    pub(crate) fn insert(&mut self, text: &str, value: V) {
        if text.len() <= BYTES / 256 {
            self.insert_owned(text.into(), value);
        }
    }

    fn insert_owned(&mut self, text: Box<str>, value: V) {
        if self.new_bytes >= BYTES {
            self.old = std::mem::take(&mut self.new);
            self.new_bytes = 0;
        }
        self.new_bytes += text.len();
        self.new.insert(text, value);
    }

    /// Texts kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.new.len() + self.old.len()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::TextMemo;

    /// 1 KiB a generation: texts of up to 4 bytes are kept.
    type Memo = TextMemo<usize, 1024>;

    fn get(memo: &mut Memo, calls: &Cell<usize>, text: &str) -> usize {
        memo.get_or_insert_with(text, |t| {
            calls.set(calls.get() + 1);
            t.len()
        })
    }

    #[test]
    fn computes_a_kept_text_once_and_a_long_one_each_time() {
        let (mut memo, calls) = (Memo::default(), Cell::new(0));
        assert_eq!(get(&mut memo, &calls, "abcd"), 4);
        assert_eq!(get(&mut memo, &calls, "abcd"), 4);
        assert_eq!(calls.get(), 1);
        assert_eq!(get(&mut memo, &calls, "abcde"), 5);
        assert_eq!(get(&mut memo, &calls, "abcde"), 5);
        assert_eq!(calls.get(), 3, "longer than 1024 / 256 bytes: not kept");
        memo.insert("xy", 7);
        assert_eq!(get(&mut memo, &calls, "xy"), 7, "an inserted value is the one found");
        assert_eq!(calls.get(), 3);
    }

    #[test]
    fn keeps_the_texts_asked_for_and_forgets_the_others() {
        let (mut memo, calls) = (Memo::default(), Cell::new(0));
        get(&mut memo, &calls, "kept");
        get(&mut memo, &calls, "gone");
        // Twenty generations of other texts; "kept" is asked for every half
        // generation (128 texts of 4 bytes), "gone" never.
        for i in 0..(20 * 256) {
            memo.insert(&format!("{:04}", i % 10_000), 0);
            if i % 128 == 0 {
                get(&mut memo, &calls, "kept");
            }
        }
        assert_eq!(calls.get(), 2, "\"kept\" was never computed again");
        assert!(memo.len() <= 2 * 256 + 2, "at most two generations: {}", memo.len());
        get(&mut memo, &calls, "gone");
        assert_eq!(calls.get(), 3, "\"gone\" was dropped with its generation");
    }
}
