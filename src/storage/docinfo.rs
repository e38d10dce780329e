//! The compact per-memory record that ranking and filtering read.
//!
//! It is also where a memory's access metadata lives (schema 6): a recall's access
//! records rewrite this record only, not the entry. The entry row keeps the access
//! fields it was last written with, and every read of an entry takes them from
//! here ([`DocInfo::access_into`]).

use serde::{Deserialize, Serialize};

use crate::model::{MemoryEntry, MemoryType, Visibility, time};

/// What recall needs to know about a memory without decoding the whole entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DocInfo {
    /// The memory id.
    pub id: String,
    /// Its layer (table) name.
    pub layer: String,
    /// Its domain.
    pub domain: String,
    /// [`MemoryType`] code.
    pub kind: u8,
    /// Owner, if any.
    pub user_id: Option<String>,
    /// 1..=10.
    pub importance: u8,
    /// Creation time, µs since the epoch.
    pub created_at: i64,
    /// [`Visibility`] code.
    pub visibility: u8,
    /// `superseded_by` set or the `superseded` flag.
    pub superseded: bool,
    /// Archived into a conversation archive.
    pub archived: bool,
    /// Retrieval weight.
    pub salience: f64,
    /// Significance at write time.
    pub significance: f64,
    /// Somatic marker (valence, arousal) if any.
    pub somatic: Option<(f64, f64)>,
    /// Access history, µs since the epoch (bounded like the entry's).
    pub access: Vec<i64>,
    /// Access count.
    pub access_count: u32,
    /// Last access, µs since the epoch.
    pub last_accessed: Option<i64>,
    /// Number of index tokens in the content (BM25 document length).
    pub doc_len: u32,
    /// Scope globs.
    pub scope: Vec<String>,
}

impl DocInfo {
    /// Records an access at `at_us` (µs since the epoch) as
    /// [`MemoryEntry::record_access`] does on the entry, so the record stays what
    /// [`DocInfo::from_entry`] makes of the accessed entry.
    pub fn record_access(&mut self, at_us: i64, cap: usize) {
        self.record_accesses([at_us], cap);
    }

    /// Records an access at each of `times_us`, in order: the same as
    /// [`DocInfo::record_access`] of each.
    pub fn record_accesses(&mut self, times_us: impl IntoIterator<Item = i64>, cap: usize) {
        let (added, last) = crate::model::push_capped(&mut self.access, times_us, cap);
        if last.is_some() {
            self.last_accessed = last;
        }
        self.access_count = crate::model::add_count(self.access_count, added);
    }

    /// Sets `entry`'s access metadata (count, last access, history) to this
    /// record's: the entry row keeps what it was written with, this record what
    /// was recorded since.
    pub fn access_into(&self, entry: &mut MemoryEntry) {
        entry.access_count = self.access_count;
        entry.last_accessed = self.last_accessed.map(time::from_micros);
        entry.access_timestamps.clear();
        entry.access_timestamps.extend(self.access.iter().map(|&t| time::from_micros(t)));
    }

    /// Whether `entry` holds exactly this record's access metadata.
    #[must_use]
    pub fn access_of(&self, entry: &MemoryEntry) -> bool {
        entry.access_count == self.access_count
            && entry.last_accessed.as_ref().map(time::to_micros) == self.last_accessed
            && entry.access_timestamps.iter().map(time::to_micros).eq(self.access.iter().copied())
    }

    /// Builds the record for `entry` with document length `doc_len`.
    #[must_use]
    pub fn from_entry(entry: &MemoryEntry, doc_len: u32) -> Self {
        Self {
            id: entry.id.clone(),
            layer: entry.layer.clone(),
            domain: entry.domain.clone(),
            kind: entry.kind.code(),
            user_id: entry.user_id.clone(),
            importance: entry.importance,
            created_at: time::to_micros(&entry.created_at),
            visibility: entry.visibility.code(),
            superseded: entry.is_superseded(),
            archived: entry.archived,
            salience: entry.salience,
            significance: entry.significance,
            somatic: entry.somatic.as_ref().map(|s| (s.valence, s.arousal)),
            access: entry.access_timestamps.iter().map(time::to_micros).collect(),
            access_count: entry.access_count,
            last_accessed: entry.last_accessed.as_ref().map(time::to_micros),
            doc_len,
            scope: entry.scope.clone(),
        }
    }

    /// The memory type.
    #[must_use]
    pub fn kind(&self) -> MemoryType {
        MemoryType::from_code(self.kind)
    }

    /// The visibility.
    #[must_use]
    pub fn visibility(&self) -> Visibility {
        Visibility::from_code(self.visibility)
    }

    /// Whether no recall returns the memory, whoever asks and whatever the
    /// filters: a core memory or an archived one (`read::filters::rejects`).
    /// Its bit in the [`crate::storage::schema::WITHHELD`] bitmap says the same.
    #[must_use]
    pub fn withheld(&self) -> bool {
        self.kind() == MemoryType::Core || self.archived
    }

    /// Whether the memory is not public (bonded or private): some requesters
    /// may not see it (`read::filters::visible_to`). Its bit in the
    /// [`crate::storage::schema::RESTRICTED`] bitmap says the same.
    #[must_use]
    pub fn restricted(&self) -> bool {
        self.visibility() != Visibility::Public
    }

    /// Whether the memory's importance is at least `N`. Its bit in the
    /// [`crate::storage::schema::IMPORTANT`] bitmap of `N` says the same.
    #[must_use]
    pub fn important<const N: u8>(&self) -> bool {
        self.importance >= N
    }

    /// Whether the memory has no scope, so that every `scopes` filter keeps it
    /// (`read::filters::match_scope`). Its bit in the
    /// [`crate::storage::schema::UNSCOPED`] bitmap says the same.
    #[must_use]
    pub fn unscoped(&self) -> bool {
        self.scope.is_empty()
    }

    /// Whether the memory is in the episodic layer. Its bit in the
    /// [`crate::storage::schema::EPISODIC_LAYER`] bitmap says the same.
    #[must_use]
    pub fn episodic(&self) -> bool {
        self.layer == MemoryType::Episodic.as_str()
    }

    /// Whether the memory is in the semantic layer. Its bit in the
    /// [`crate::storage::schema::SEMANTIC_LAYER`] bitmap says the same.
    #[must_use]
    pub fn semantic(&self) -> bool {
        self.layer == MemoryType::Semantic.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MemoryType;
    use proptest::prelude::*;

    proptest! {
        /// Accesses recorded together leave the entry and its compact record as
        /// recording them one at a time does, and the two still agree.
        #[test]
        fn accesses_recorded_together_match_one_at_a_time(
            earlier in proptest::collection::vec(0i64..1_000_000, 0..12),
            later in proptest::collection::vec(0i64..1_000_000, 0..12),
            cap in 0usize..8,
        ) {
            let mut entry = MemoryEntry::new(MemoryType::Episodic, "x");
            entry.record_accesses(earlier.iter().map(|&t| time::from_micros(t)), cap);
            let mut one = entry.clone();
            for &t in &later {
                one.record_access(time::from_micros(t), cap);
            }
            let mut together = entry.clone();
            together.record_accesses(later.iter().map(|&t| time::from_micros(t)), cap);
            prop_assert_eq!(&together, &one);
            prop_assert_eq!(together.access_count as usize, earlier.len() + later.len());

            let mut info = DocInfo::from_entry(&entry, 1);
            info.record_accesses(later.iter().copied(), cap);
            let mut info_one = DocInfo::from_entry(&entry, 1);
            for &t in &later {
                info_one.record_access(t, cap);
            }
            prop_assert_eq!(&info, &info_one);
            prop_assert_eq!(&info, &DocInfo::from_entry(&one, 1));
        }

        /// Recording accesses changes no bitmap's bit: the writer rewrites an
        /// accessed memory's compact record without reading or marking the
        /// bitmaps (`Writer::put_access`), whatever the memory's type, layer,
        /// importance, visibility, scope and state.
        #[test]
        fn accesses_change_no_bitmaps_bit(
            kind in 0usize..5,
            custom_layer in any::<bool>(),
            importance in 0u8..=10,
            visibility in 0usize..3,
            scoped in any::<bool>(),
            archived in any::<bool>(),
            superseded in any::<bool>(),
            times in proptest::collection::vec(0i64..1_000_000, 1..12),
            cap in 0usize..8,
        ) {
            let kinds = [
                MemoryType::Core,
                MemoryType::Episodic,
                MemoryType::Semantic,
                MemoryType::Procedural,
                MemoryType::Social,
            ];
            let mut entry = MemoryEntry::new(kinds[kind], "x");
            if custom_layer {
                entry.layer = "skills".to_owned();
            }
            entry.importance = importance;
            entry.visibility =
                [Visibility::Public, Visibility::Bonded, Visibility::Private][visibility];
            if scoped {
                entry.scope = vec!["project:a".to_owned()];
            }
            entry.archived = archived;
            if superseded {
                entry.superseded_by = Some("newer".to_owned());
            }
            let before = DocInfo::from_entry(&entry, 1);
            let mut after = before.clone();
            after.record_accesses(times.iter().copied(), cap);
            prop_assert_ne!(&after, &before);
            for (_, marked) in crate::storage::bitmap::BITMAPS {
                prop_assert_eq!(marked(&after), marked(&before));
            }
        }
    }
}
