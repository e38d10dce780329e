//! Compares an index's expected rows with its stored rows, both in key order,
//! one stored row at a time: `check` never holds a table's stored rows.

use std::fmt::Debug;
use std::iter::Peekable;

/// How many mismatches of each kind a table reports before it only counts them.
pub(super) const SHOWN: usize = 20;

/// Mismatches shown and counted for one table.
pub(super) struct Tally {
    name: &'static str,
    /// Missing rows and rows with other values.
    wrong: usize,
    /// Rows nothing expects.
    stray: usize,
}

impl Tally {
    pub(super) fn new(name: &'static str) -> Self {
        Self { name, wrong: 0, stray: 0 }
    }

    /// Reports a missing row or a row with another value (the first [`SHOWN`]).
    pub(super) fn wrong(&mut self, out: &mut Vec<String>, what: impl FnOnce() -> String) {
        self.wrong += 1;
        if self.wrong <= SHOWN {
            out.push(format!("{}: {}", self.name, what()));
        }
    }

    /// Reports a row nothing expects (the first [`SHOWN`]).
    pub(super) fn stray(&mut self, out: &mut Vec<String>, what: impl FnOnce() -> String) {
        self.stray += 1;
        if self.stray <= SHOWN {
            out.push(format!("{}: {}", self.name, what()));
        }
    }

    /// Says how many mismatches were counted but not shown.
    pub(super) fn close(self, out: &mut Vec<String>) {
        let hidden = self.wrong.saturating_sub(SHOWN) + self.stray.saturating_sub(SHOWN);
        if hidden > 0 {
            out.push(format!("{}: {hidden} more mismatches not shown", self.name));
        }
    }
}

/// Walks the expected rows of a table (ascending by key) beside its stored
/// rows, fed in the table's key order.
pub(super) struct SortedDiff<K, V, I: Iterator<Item = (K, V)>> {
    want: Peekable<I>,
    tally: Tally,
    /// `"row "` for key-only tables (sets), `""` for tables with values.
    noun: &'static str,
}

impl<K: Ord + Debug, V: PartialEq + Debug, I: Iterator<Item = (K, V)>> SortedDiff<K, V, I> {
    /// A table with values.
    pub(super) fn map(name: &'static str, want: impl IntoIterator<IntoIter = I>) -> Self {
        Self { want: want.into_iter().peekable(), tally: Tally::new(name), noun: "" }
    }

    /// Takes the next stored row. Rows must come in ascending key order.
    pub(super) fn got(&mut self, key: K, value: V, out: &mut Vec<String>) {
        while let Some((k, _)) = self.want.next_if(|(k, _)| *k < key) {
            self.tally.wrong(out, || format!("missing {}{k:?}", self.noun));
        }
        match self.want.next_if(|(k, _)| *k == key) {
            Some((_, v)) if v != value => {
                self.tally.wrong(out, || format!("{key:?} is {value:?}, expected {v:?}"));
            }
            Some(_) => {}
            None => self.tally.stray(out, || format!("stray {}{key:?}", self.noun)),
        }
    }

    /// Reports the expected rows never stored.
    pub(super) fn finish(mut self, out: &mut Vec<String>) {
        for (k, _) in self.want.by_ref() {
            self.tally.wrong(out, || format!("missing {}{k:?}", self.noun));
        }
        self.tally.close(out);
    }
}

impl<K: Ord + Debug, I: Iterator<Item = (K, ())>> SortedDiff<K, (), I> {
    /// A key-only table.
    pub(super) fn set(name: &'static str, want: impl IntoIterator<IntoIter = I>) -> Self {
        Self { want: want.into_iter().peekable(), tally: Tally::new(name), noun: "row " }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(want: &[(u32, char)], got: &[(u32, char)]) -> Vec<String> {
        let mut out = Vec::new();
        let mut d = SortedDiff::map("t", want.iter().copied());
        for &(k, v) in got {
            d.got(k, v, &mut out);
        }
        d.finish(&mut out);
        out
    }

    #[test]
    fn reports_missing_changed_and_stray_rows() {
        let out = run(&[(1, 'a'), (2, 'b'), (4, 'd'), (6, 'f')], &[(1, 'a'), (2, 'x'), (3, 'c')]);
        assert_eq!(
            out,
            vec![
                "t: 2 is 'x', expected 'b'".to_owned(),
                "t: stray 3".to_owned(),
                "t: missing 4".to_owned(),
                "t: missing 6".to_owned(),
            ]
        );
        assert!(run(&[(1, 'a'), (5, 'e')], &[(1, 'a'), (5, 'e')]).is_empty());
    }

    #[test]
    fn shows_twenty_of_each_kind_then_counts() {
        let want: Vec<(u32, char)> = (0..30).map(|k| (k * 2, 'w')).collect();
        let got: Vec<(u32, char)> = (0..25).map(|k| (k * 2 + 1, 'g')).collect();
        let out = run(&want, &got);
        assert_eq!(out.iter().filter(|l| l.starts_with("t: missing")).count(), SHOWN);
        assert_eq!(out.iter().filter(|l| l.starts_with("t: stray")).count(), SHOWN);
        assert_eq!(out.last().map(String::as_str), Some("t: 15 more mismatches not shown"));
    }
}
