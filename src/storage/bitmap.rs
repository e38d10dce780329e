//! Memories marked by one bit per docno: the superseded ones ([`SUPERSEDED`]),
//! the withheld ones ([`WITHHELD`]: core memories and archived episodes,
//! which no recall returns), the restricted ones ([`RESTRICTED`]: bonded
//! and private, which only some requesters see), those of the two layers
//! the write path fills ([`EPISODIC_LAYER`], [`SEMANTIC_LAYER`]), those of
//! importance at least 6, 7, 8, 9 and 10 ([`IMPORTANT`]), and those without a
//! scope ([`UNSCOPED`]).
//!
//! Recall leaves superseded memories out unless asked for them, and they stay in
//! the postings (an old fact keeps its text). A user who restates a fact over
//! and over leaves thousands of superseded copies that score as well as the
//! current one: without the bitmap each of them cost a read of its `docs`
//! record before the filter turned it away. With it, candidate generation skips
//! them on one bit, before reading anything ([`Hidden`]). Archived episodes
//! (a store's old conversations, after `archive_old_memories`) and core
//! memories are skipped the same way on theirs, restricted ones on theirs when
//! the requester may see none of them, and a recall that no other filter can
//! narrow then knows that every memory its search keeps is one it returns
//! (`read::candidates`). A `layer` or `types` filter keeping the episodic or
//! semantic layer, or both, skips the other memories on theirs when the
//! layers are too large to walk (`read::filters::LayerMembers`), and a
//! `min_importance` filter of 6 or more walks its bitmap's set bits
//! ([`Hidden::next_ge`]), as a `scopes` filter keeping few memories walks the
//! unscoped ones' (`read::filters::ScopeMembers`).
//!
//! One row per [`CHUNK_DOCS`] docnos (a 4 KiB value), only for chunks holding a
//! marked memory. The writer keeps each bit equal to what the memory's record
//! says: it is set and cleared wherever a record is written or removed, so
//! every write path agrees by construction (`storage::check` verifies both).
//!
//! [`SUPERSEDED`]: super::schema::SUPERSEDED
//! [`WITHHELD`]: super::schema::WITHHELD
//! [`RESTRICTED`]: super::schema::RESTRICTED
//! [`EPISODIC_LAYER`]: super::schema::EPISODIC_LAYER
//! [`SEMANTIC_LAYER`]: super::schema::SEMANTIC_LAYER
//! [`IMPORTANT`]: super::schema::IMPORTANT
//! [`UNSCOPED`]: super::schema::UNSCOPED

use foldhash::HashMap;
use redb::{ReadableTable, Table, TableDefinition};

use super::DocInfo;
use super::schema::{
    EPISODIC_LAYER, IMPORTANT, RESTRICTED, SEMANTIC_LAYER, SUPERSEDED, UNSCOPED, WITHHELD,
};
use crate::error::{Error, Result};

/// Which memories a bitmap marks, by their compact record.
pub type Marker = fn(&DocInfo) -> bool;

/// A bitmap's table and the memories it marks.
pub type Bitmap = (TableDefinition<'static, u64, &'static [u8]>, Marker);

/// Every bitmap the writer keeps equal to the records: the superseded memories
/// (schema 9), the withheld and the restricted ones (schema 15), the episodic
/// and the semantic layers', and the memories of importance at least 6 to 10
/// (schema 16), the memories without a scope (schema 17).
pub const BITMAPS: [Bitmap; 11] = [
    (SUPERSEDED, superseded),
    (WITHHELD, DocInfo::withheld),
    (RESTRICTED, DocInfo::restricted),
    (EPISODIC_LAYER, DocInfo::episodic),
    (SEMANTIC_LAYER, DocInfo::semantic),
    (IMPORTANT[0], DocInfo::important::<6>),
    (IMPORTANT[1], DocInfo::important::<7>),
    (IMPORTANT[2], DocInfo::important::<8>),
    (IMPORTANT[3], DocInfo::important::<9>),
    (IMPORTANT[4], DocInfo::important::<10>),
    (UNSCOPED, DocInfo::unscoped),
];

/// The bitmaps new in schema 16 (the layers' and the important memories'),
/// which its upgrade writes: `BITMAPS[3..10]`.
pub const SCHEMA_16: &[Bitmap] = BITMAPS.split_at(3).1.split_at(7).0;

/// The bitmaps new in schema 17 (the unscoped memories'), which its upgrade
/// writes: those after the first ten, as long as schema 17 has the last (a
/// later schema's bitmaps are written by an upgrade of their own, so this
/// fails to compile once one is added).
pub const SCHEMA_17: &[Bitmap] = BITMAPS.split_at(10).1;
const _: () = assert!(BITMAPS.len() == 11, "schema 17's bitmaps are BITMAPS[10..11]");

/// Whether the record marks its memory superseded.
#[must_use]
pub fn superseded(info: &DocInfo) -> bool {
    info.superseded
}

/// Docnos per bitmap row.
pub const CHUNK_DOCS: u64 = 32_768;
/// Bytes of a bitmap row.
const CHUNK_BYTES: usize = (CHUNK_DOCS / 8) as usize;

/// The row holding `docno`'s bit, the byte in it and the bit's mask.
fn place(docno: u64) -> (u64, usize, u8) {
    let within = docno % CHUNK_DOCS;
    (docno / CHUNK_DOCS, (within / 8) as usize, 1 << (within % 8))
}

/// A stored row, checked.
fn row(value: &[u8]) -> Result<Box<[u8]>> {
    if value.len() != CHUNK_BYTES {
        return Err(Error::Corrupted(format!(
            "a bitmap row holds {} bytes, not {CHUNK_BYTES}",
            value.len()
        )));
    }
    Ok(value.into())
}

/// Every docno whose bit is set in `table`, ascending (for `storage::check`).
///
/// # Errors
/// Storage errors; [`Error::Corrupted`] on a row of the wrong size.
pub fn all(table: &impl ReadableTable<u64, &'static [u8]>) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for r in table.range::<u64>(..)? {
        let (k, v) = r?;
        let bits = row(v.value())?;
        let base = k.value().saturating_mul(CHUNK_DOCS);
        for (i, byte) in bits.iter().enumerate() {
            for b in 0..8u64 {
                if byte & (1 << b) != 0 {
                    out.push(base + i as u64 * 8 + b);
                }
            }
        }
    }
    Ok(out)
}

/// The marked memories one query leaves out, read from a snapshot's bitmap a
/// row at a time as the search reaches it.
pub struct Hidden<'r, T: ReadableTable<u64, &'static [u8]>> {
    table: &'r T,
    /// The rows read, by chunk; `None` for a chunk without a row.
    rows: foldhash::HashMap<u64, Option<Box<[u8]>>>,
    /// The chunk of the last docno asked for, and its row: a search asks in
    /// ascending docno order, so nearly every ask falls in the same chunk as the
    /// one before it and is answered without a hash lookup.
    last: Option<(u64, Option<Box<[u8]>>)>,
    /// The last [`Hidden::next_ge`]: what it was asked and answered. The
    /// answer holds for every later ask up to it (a search asks in ascending
    /// order), so those are answered without reading.
    walked: Option<(u64, Option<u64>)>,
}

impl<'r, T: ReadableTable<u64, &'static [u8]>> Hidden<'r, T> {
    /// Over `table` (a snapshot's table of one of [`BITMAPS`]).
    pub fn new(table: &'r T) -> Self {
        Self { table, rows: foldhash::HashMap::default(), last: None, walked: None }
    }

    /// Whether the memory `docno` is marked.
    ///
    /// # Errors
    /// Storage errors; [`Error::Corrupted`] on a row of the wrong size.
    pub fn contains(&mut self, docno: u64) -> Result<bool> {
        let (chunk, byte, mask) = place(docno);
        if self.last.as_ref().is_none_or(|(c, _)| *c != chunk) {
            let bits = match self.rows.remove(&chunk) {
                Some(b) => b,
                None => self.table.get(chunk)?.map(|v| row(v.value())).transpose()?,
            };
            if let Some((c, b)) = self.last.replace((chunk, bits)) {
                self.rows.insert(c, b);
            }
        }
        Ok(self.last.as_ref().and_then(|(_, b)| b.as_ref()).is_some_and(|b| b[byte] & mask != 0))
    }

    /// The smallest marked docno at or after `docno` (`None`: there is none).
    /// Reads the row of `docno`'s chunk, then, past its last set bit, finds
    /// the next stored row by a range read (rows exist only for chunks with a
    /// bit set, so every row it reads holds one).
    ///
    /// # Errors
    /// Storage errors; [`Error::Corrupted`] on a row of the wrong size.
    pub fn next_ge(&mut self, docno: u64) -> Result<Option<u64>> {
        if let Some((asked, answer)) = self.walked
            && asked <= docno
            && answer.is_none_or(|a| a >= docno)
        {
            return Ok(answer);
        }
        let answer = self.find_ge(docno)?;
        self.walked = Some((docno, answer));
        Ok(answer)
    }

    /// [`Hidden::next_ge`], read.
    fn find_ge(&mut self, docno: u64) -> Result<Option<u64>> {
        let (mut chunk, mut from) = (docno / CHUNK_DOCS, docno % CHUNK_DOCS);
        loop {
            // Load the chunk's row as `contains` does.
            self.contains(chunk.saturating_mul(CHUNK_DOCS))?;
            if let Some(bits) = self.last.as_ref().and_then(|(_, b)| b.as_ref())
                && let Some(at) = next_set(bits, from)
            {
                return Ok(Some(chunk * CHUNK_DOCS + at));
            }
            let after = chunk.saturating_add(1);
            let next = match self.table.range(after..)?.next() {
                Some(row) => row?.0.value(),
                None => return Ok(None),
            };
            if next <= chunk {
                return Ok(None);
            }
            (chunk, from) = (next, 0);
        }
    }
}

/// The first set bit of `bits` at or after bit `from`.
fn next_set(bits: &[u8], from: u64) -> Option<u64> {
    let start = usize::try_from(from / 8).ok()?;
    let mut mask = 0xffu8 << (from % 8);
    for (i, &byte) in bits.iter().enumerate().skip(start) {
        let b = byte & mask;
        if b != 0 {
            return Some(i as u64 * 8 + u64::from(b.trailing_zeros()));
        }
        mask = 0xff;
    }
    None
}

/// A write transaction's view of the bitmap: rows are read once, changed in
/// memory and written back by [`Marks::write`].
#[derive(Default)]
pub struct Marks {
    /// `chunk → (bits, changed)`; no bits for a row the table does not hold
    /// and no bit has been set in. Every memory's record write clears its bit,
    /// and nearly every row it falls in is empty: clearing is then a lookup.
    rows: HashMap<u64, (Option<Bits>, bool)>,
}

/// One row's bits.
type Bits = Box<[u8]>;

impl Marks {
    /// Sets (`on`) or clears `docno`'s bit.
    ///
    /// # Errors
    /// Storage errors; [`Error::Corrupted`] on a row of the wrong size.
    pub fn set(
        &mut self,
        table: &impl ReadableTable<u64, &'static [u8]>,
        docno: u64,
        on: bool,
    ) -> Result<()> {
        let (chunk, byte, mask) = place(docno);
        let (bits, changed) = match self.rows.entry(chunk) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let bits = table.get(chunk)?.map(|g| row(g.value())).transpose()?;
                v.insert((bits, false))
            }
        };
        let bits = match bits {
            Some(b) => b,
            None if !on => return Ok(()),
            None => bits.insert(vec![0u8; CHUNK_BYTES].into_boxed_slice()),
        };
        if (bits[byte] & mask != 0) != on {
            bits[byte] ^= mask;
            *changed = true;
        }
        Ok(())
    }

    /// Writes the changed rows (a row left with no bit set is removed) and
    /// forgets them.
    ///
    /// # Errors
    /// Storage errors.
    pub fn write(&mut self, table: &mut Table<'_, u64, &'static [u8]>) -> Result<()> {
        for (chunk, (bits, changed)) in self.rows.drain() {
            let Some(bits) = bits.filter(|_| changed) else { continue };
            if bits.iter().all(|b| *b == 0) {
                table.remove(chunk)?;
            } else {
                table.insert(chunk, &*bits)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::schema::SUPERSEDED;
    use proptest::prelude::*;

    proptest! {
        /// `next_ge` finds the smallest marked docno at or after each target,
        /// over chunks with and without rows, in any order of targets.
        #[test]
        fn next_ge_finds_the_next_mark(
            marks in prop::collection::btree_set(0u64..6 * CHUNK_DOCS, 0..200),
            near in prop::collection::vec((0usize..200, 0u64..3), 1..30),
            far in prop::collection::vec(0u64..7 * CHUNK_DOCS, 1..30),
        ) {
            let db = redb::Database::builder()
                .create_with_backend(redb::backends::InMemoryBackend::new())
                .expect("db");
            let txn = db.begin_write().expect("txn");
            let marks: Vec<u64> = marks.into_iter().collect();
            let mut t = txn.open_table(SUPERSEDED).expect("table");
            let mut m = Marks::default();
            for &d in &marks {
                m.set(&t, d, true).expect("set");
            }
            m.write(&mut t).expect("write");
            // Targets on and next to marks, and anywhere.
            let mut targets: Vec<u64> = near
                .iter()
                .filter_map(|&(i, off)| marks.get(i % marks.len().max(1)).map(|d| d + off))
                .collect();
            targets.extend(far);
            let mut h = Hidden::new(&t);
            for t in targets {
                let want = marks.iter().copied().find(|&d| d >= t);
                prop_assert_eq!(h.next_ge(t).expect("next"), want, "target {}", t);
            }
        }
    }

    #[test]
    fn marks_round_trip_through_the_table() {
        let db = redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .expect("db");
        let set: Vec<u64> = vec![0, 7, 8, CHUNK_DOCS - 1, CHUNK_DOCS, 5 * CHUNK_DOCS + 3];
        let txn = db.begin_write().expect("txn");
        {
            let mut t = txn.open_table(SUPERSEDED).expect("table");
            let mut m = Marks::default();
            for &d in &set {
                m.set(&t, d, true).expect("set");
            }
            // Set twice, and one set then cleared: no trace of the latter.
            m.set(&t, 7, true).expect("set");
            m.set(&t, 9 * CHUNK_DOCS, true).expect("set");
            m.set(&t, 9 * CHUNK_DOCS, false).expect("clear");
            m.write(&mut t).expect("write");
            assert_eq!(all(&t).expect("all"), set);
            assert!(t.get(9).expect("get").is_none(), "an empty row is not kept");
            // A later transaction's marks start from the stored rows.
            let mut m = Marks::default();
            m.set(&t, 8, false).expect("clear");
            m.set(&t, 5 * CHUNK_DOCS + 3, false).expect("clear");
            m.write(&mut t).expect("write");
            assert_eq!(all(&t).expect("all"), vec![0, 7, CHUNK_DOCS - 1, CHUNK_DOCS]);
            assert!(t.get(5).expect("get").is_none(), "the emptied row is removed");
            let mut h = Hidden::new(&t);
            for d in [0, 7, CHUNK_DOCS - 1, CHUNK_DOCS] {
                assert!(h.contains(d).expect("contains"), "{d}");
            }
            for d in [1, 8, CHUNK_DOCS + 1, 5 * CHUNK_DOCS + 3, 100 * CHUNK_DOCS] {
                assert!(!h.contains(d).expect("contains"), "{d}");
            }
        }
        txn.commit().expect("commit");
    }
}
