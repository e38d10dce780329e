//! [`Reader`]: a consistent snapshot of the store; the tables a read may not
//! need are opened on first use.

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use redb::{ReadOnlyTable, ReadTransaction, TableDefinition, TableHandle};

use super::access_log::{AccessLog, AccessView, ReadGuard};
use super::block_cache::BlockCache;
use super::codec::decode;
use super::docinfo::DocInfo;
use super::schema::{self, *};
use super::tail::{TailCache, TailIndex};
use super::{CorpusStats, meta_keys, query};
use crate::Profile;
use crate::error::Result;
use crate::model::MemoryEntry;

type Str = &'static str;
type Bytes = &'static [u8];
/// A fact-prefix or fact-attribute row: (slot key or attribute, user, domain,
/// docno).
type FactKey = (Str, Str, Str, u64);
/// An importance row: (layer, importance, created µs, docno).
type ImportanceKey = (Str, u8, i64, u64);

/// The entry tables a snapshot has opened, by name, and the name of the last one
/// asked for (built in place, so that finding an open table allocates nothing).
#[derive(Default)]
struct EntryTables {
    name: String,
    open: foldhash::HashMap<String, ReadOnlyTable<u64, Bytes>>,
}

/// A read snapshot: sees exactly the transactions committed before it began.
pub struct Reader {
    profile: Profile,
    txn: ReadTransaction,
    pub(crate) meta: ReadOnlyTable<Str, Bytes>,
    ids: OnceLock<ReadOnlyTable<Str, u64>>,
    pub(crate) docs: ReadOnlyTable<u64, Bytes>,
    pub(crate) postings: ReadOnlyTable<(Str, u64), Bytes>,
    fact_tokens: OnceLock<ReadOnlyTable<(Str, Str, u64), ()>>,
    prefixes: OnceLock<ReadOnlyTable<FactKey, ()>>,
    attributes: OnceLock<ReadOnlyTable<FactKey, ()>>,
    fact_cards: OnceLock<ReadOnlyTable<(Str, u64), Bytes>>,
    entities: OnceLock<ReadOnlyTable<(Str, u64), ()>>,
    user_terms: OnceLock<ReadOnlyTable<(Str, u64), Bytes>>,
    rowless: OnceLock<ReadOnlyTable<Str, ()>>,
    posting_tail: OnceLock<ReadOnlyTable<u64, Bytes>>,
    /// The bitmaps, in [`super::bitmap::BITMAPS`]' order.
    bitmaps: [OnceLock<ReadOnlyTable<u64, Bytes>>; super::bitmap::BITMAPS.len()],
    importance: OnceLock<ReadOnlyTable<ImportanceKey, ()>>,
    layer_order: OnceLock<ReadOnlyTable<(Str, u64), ()>>,
    scopes: OnceLock<ReadOnlyTable<(Str, u64), ()>>,
    context: OnceLock<ReadOnlyTable<u64, Str>>,
    /// Stored vectors; `None` in a store written before the table existed.
    embeddings: OnceLock<Option<ReadOnlyTable<u64, Bytes>>>,
    entry_tables: Mutex<EntryTables>,
    /// The graph's adjacency table (recall asks it about every word window of
    /// its query).
    graph_adj: OnceLock<ReadOnlyTable<(Str, u64), ()>>,
    stats: CorpusStats,
    /// The postings tail of this snapshot, indexed (see [`super::tail`]).
    pub(crate) tail: Arc<TailIndex>,
    /// The store's decoded postings of the most-searched terms.
    pub(crate) blocks: Arc<BlockCache>,
    /// Access records this snapshot does not hold, overlaid on what it reads.
    access: AccessView,
    /// The access log's epoch when the snapshot began.
    access_epoch: u64,
}

impl Reader {
    pub(crate) fn open(
        txn: ReadTransaction,
        profile: Profile,
        tails: &TailCache,
        blocks: &Arc<BlockCache>,
        access: &Arc<AccessLog>,
        guard: ReadGuard,
        upto: u64,
    ) -> Result<Self> {
        let meta = txn.open_table(META)?;
        let applied = super::access_applied(
            meta.get(meta_keys::ACCESS_APPLIED)?.as_ref().map(|v| v.value()),
        )?;
        let access_epoch = guard.epoch;
        let access = AccessView::live(access, applied, guard, upto);
        let stats = match meta.get(meta_keys::STATS)? {
            Some(v) => decode(v.value(), "corpus stats")?,
            None => CorpusStats::default(),
        };
        let version = match meta.get(meta_keys::TAIL_VERSION)? {
            Some(v) => super::tail::decode_version(v.value())?,
            None => 0,
        };
        let tail = tails.get(version, || match txn.open_table(POSTING_TAIL) {
            Ok(t) => TailIndex::load(&t),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(TailIndex::default()),
            Err(e) => Err(e.into()),
        })?;
        // Every table is created with the store (`Writer::create_all`); those a
        // read may not need are opened when it first asks for them.
        Ok(Self {
            profile,
            meta,
            ids: OnceLock::new(),
            docs: txn.open_table(DOCS)?,
            postings: txn.open_table(POSTINGS)?,
            fact_tokens: OnceLock::new(),
            prefixes: OnceLock::new(),
            attributes: OnceLock::new(),
            fact_cards: OnceLock::new(),
            entities: OnceLock::new(),
            user_terms: OnceLock::new(),
            rowless: OnceLock::new(),
            posting_tail: OnceLock::new(),
            bitmaps: Default::default(),
            importance: OnceLock::new(),
            layer_order: OnceLock::new(),
            scopes: OnceLock::new(),
            context: OnceLock::new(),
            embeddings: OnceLock::new(),
            entry_tables: Mutex::new(EntryTables::default()),
            graph_adj: OnceLock::new(),
            stats,
            tail,
            blocks: Arc::clone(blocks),
            access,
            access_epoch,
            txn,
        })
    }

    /// The access log's epoch when this snapshot began (see
    /// [`super::Store::record_access`]).
    pub(crate) fn access_epoch(&self) -> u64 {
        self.access_epoch
    }

    /// Makes the snapshot independent of access records made after it was taken
    /// being written (for snapshots kept a long time).
    pub(crate) fn freeze_access(&mut self) {
        self.access = self.access.frozen();
    }

    /// Every posting of `term` in this snapshot (blocks, then tail), ascending.
    ///
    /// # Errors
    /// Storage errors; [`crate::Error::Corrupted`] on a malformed block.
    pub fn postings_of(&self, term: &str) -> Result<Vec<super::postings::Posting>> {
        let mut out = super::postings::postings_of(&self.postings, term)?;
        if let Some(t) = self.tail.term(term) {
            out.extend_from_slice(&t.postings);
        }
        Ok(out)
    }

    /// The store's profile.
    #[must_use]
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// The underlying transaction.
    #[must_use]
    pub fn txn(&self) -> &ReadTransaction {
        &self.txn
    }

    /// `table`, opened from this snapshot on first use.
    fn lazy<'r, K: redb::Key + 'static, V: redb::Value + 'static>(
        &'r self,
        table: &'r OnceLock<ReadOnlyTable<K, V>>,
        def: TableDefinition<'static, K, V>,
    ) -> Result<&'r ReadOnlyTable<K, V>> {
        if let Some(t) = table.get() {
            return Ok(t);
        }
        let t = self.txn.open_table(def)?;
        Ok(table.get_or_init(|| t))
    }

    /// The graph's adjacency table.
    pub(crate) fn graph_adj(&self) -> Result<&ReadOnlyTable<(Str, u64), ()>> {
        self.lazy(&self.graph_adj, GRAPH_ADJ)
    }

    /// The id index (id to docno).
    pub(crate) fn ids(&self) -> Result<&ReadOnlyTable<Str, u64>> {
        self.lazy(&self.ids, IDS)
    }

    /// The fact-token index.
    pub(crate) fn fact_tokens(&self) -> Result<&ReadOnlyTable<(Str, Str, u64), ()>> {
        self.lazy(&self.fact_tokens, FACT_TOKENS)
    }

    /// The fact-prefix index.
    pub(crate) fn prefixes(&self) -> Result<&ReadOnlyTable<FactKey, ()>> {
        self.lazy(&self.prefixes, PREFIXES)
    }

    /// The fact-attribute index.
    pub(crate) fn attributes(&self) -> Result<&ReadOnlyTable<FactKey, ()>> {
        self.lazy(&self.attributes, ATTRIBUTES)
    }

    /// The fact cards.
    pub(crate) fn fact_cards(&self) -> Result<&ReadOnlyTable<(Str, u64), Bytes>> {
        self.lazy(&self.fact_cards, FACT_CARDS)
    }

    /// The entity index.
    pub(crate) fn entities(&self) -> Result<&ReadOnlyTable<(Str, u64), ()>> {
        self.lazy(&self.entities, ENTITIES)
    }

    /// Each memory's own index terms, by owner (see [`super::doc_terms`]).
    pub(crate) fn user_terms(&self) -> Result<&ReadOnlyTable<(Str, u64), Bytes>> {
        self.lazy(&self.user_terms, USER_TERMS)
    }

    /// The owners without `user_terms` rows (see [`super::doc_terms::ROW_CAP`]).
    pub(crate) fn rowless_owners(&self) -> Result<&ReadOnlyTable<Str, ()>> {
        self.lazy(&self.rowless, ROWLESS)
    }

    /// Whether `owner`'s memories have no `user_terms` rows.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn is_rowless(&self, owner: &str) -> Result<bool> {
        Ok(self.rowless_owners()?.get(owner)?.is_some())
    }

    /// The postings tail's rows (see [`super::tail`]).
    pub(crate) fn posting_tail(&self) -> Result<&ReadOnlyTable<u64, Bytes>> {
        self.lazy(&self.posting_tail, POSTING_TAIL)
    }

    /// The bitmap `def`, one of [`super::bitmap::BITMAPS`].
    fn bitmap(
        &self,
        def: TableDefinition<'static, u64, Bytes>,
    ) -> Result<&ReadOnlyTable<u64, Bytes>> {
        let at = super::bitmap::BITMAPS.iter().position(|(d, _)| d.name() == def.name());
        match at.and_then(|i| self.bitmaps.get(i)) {
            Some(table) => self.lazy(table, def),
            None => Err(crate::Error::Corrupted(format!("{} is not a bitmap", def.name()))),
        }
    }

    /// The superseded-memories bitmap (`storage::bitmap`).
    pub(crate) fn superseded(&self) -> Result<&ReadOnlyTable<u64, Bytes>> {
        self.bitmap(SUPERSEDED)
    }

    /// The withheld-memories bitmap (core and archived; `storage::bitmap`).
    pub(crate) fn withheld(&self) -> Result<&ReadOnlyTable<u64, Bytes>> {
        self.bitmap(WITHHELD)
    }

    /// The restricted-memories bitmap (not public; `storage::bitmap`).
    pub(crate) fn restricted(&self) -> Result<&ReadOnlyTable<u64, Bytes>> {
        self.bitmap(RESTRICTED)
    }

    /// The bitmap of `layer`'s memories, for the layers that have one (the
    /// episodic and the semantic: `storage::bitmap`).
    pub(crate) fn layer_bits(&self, layer: &str) -> Result<Option<&ReadOnlyTable<u64, Bytes>>> {
        if layer == crate::model::MemoryType::Episodic.as_str() {
            self.bitmap(EPISODIC_LAYER).map(Some)
        } else if layer == crate::model::MemoryType::Semantic.as_str() {
            self.bitmap(SEMANTIC_LAYER).map(Some)
        } else {
            Ok(None)
        }
    }

    /// The bitmap of the memories of importance at least `min`, for `min` from
    /// [`IMPORTANT_FROM`] to 10 (`storage::bitmap`).
    pub(crate) fn important(&self, min: i32) -> Result<Option<&ReadOnlyTable<u64, Bytes>>> {
        let Some(i) = usize::try_from(min - i32::from(IMPORTANT_FROM)).ok() else {
            return Ok(None);
        };
        IMPORTANT.get(i).map(|def| self.bitmap(*def)).transpose()
    }

    /// The importance index.
    pub(crate) fn importance(&self) -> Result<&ReadOnlyTable<ImportanceKey, ()>> {
        self.lazy(&self.importance, IMPORTANCE)
    }

    /// The layer-order index.
    pub(crate) fn layer_order(&self) -> Result<&ReadOnlyTable<(Str, u64), ()>> {
        self.lazy(&self.layer_order, LAYER_ORDER)
    }

    /// The memories' scopes, one row per scope and memory.
    pub(crate) fn scopes(&self) -> Result<&ReadOnlyTable<(Str, u64), ()>> {
        self.lazy(&self.scopes, SCOPES)
    }

    /// The members of `key` in `index` in this snapshot, from the set the store
    /// keeps of them (see [`super::key_sets`]).
    pub(crate) fn key_members(
        &self,
        index: super::key_sets::Index,
        key: &str,
    ) -> Result<super::key_sets::KeyMembers> {
        let table = match index {
            super::key_sets::Index::Layers => self.layer_order()?,
            super::key_sets::Index::Scopes => self.scopes()?,
        };
        let stamp = super::key_sets::stamp(&self.meta, index, key)?;
        self.blocks.key_set(table, (index, key), stamp, self.stats.next_docno)
    }

    /// The bitmap of the memories without a scope (`storage::bitmap`).
    pub(crate) fn unscoped(&self) -> Result<&ReadOnlyTable<u64, Bytes>> {
        self.bitmap(UNSCOPED)
    }

    /// The context (conversation) index.
    pub(crate) fn context(&self) -> Result<&ReadOnlyTable<u64, Str>> {
        self.lazy(&self.context, CONTEXT)
    }

    /// Stored vectors; `None` in a store written before the table existed.
    pub(crate) fn embeddings(&self) -> Result<Option<&ReadOnlyTable<u64, Bytes>>> {
        if let Some(t) = self.embeddings.get() {
            return Ok(t.as_ref());
        }
        let t = match self.txn.open_table(EMBEDDINGS) {
            Ok(t) => Some(t),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(e.into()),
        };
        Ok(self.embeddings.get_or_init(|| t).as_ref())
    }

    /// Corpus statistics.
    #[must_use]
    pub fn stats(&self) -> CorpusStats {
        self.stats
    }

    /// Reads a meta value.
    pub fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.meta.get(key)?.map(|v| v.value().to_vec()))
    }

    /// The stored self-model (the seed domains when none is stored).
    ///
    /// # Errors
    /// Storage errors, or a stored self-model that is not valid JSON.
    pub fn self_model(&self) -> Result<crate::model::SelfModel> {
        match self.meta.get(meta_keys::SELF_MODEL)? {
            Some(v) => super::codec::decode_self_model(v.value()),
            None => Ok(crate::model::SelfModel::default()),
        }
    }

    /// The docno of memory `id`.
    pub fn docno_of(&self, id: &str) -> Result<Option<u64>> {
        query::docno_of(self.ids()?, id)
    }

    /// The compact record of `docno`.
    pub fn docinfo(&self, docno: u64) -> Result<Option<DocInfo>> {
        let mut info = query::docinfo(&self.docs, docno)?;
        if let Some(i) = &mut info {
            self.access.info(docno, i);
        }
        Ok(info)
    }

    /// The entry at `docno` of table `(layer, domain)`, with its access metadata
    /// (from its compact record, as this snapshot sees it).
    pub fn entry_in(&self, layer: &str, domain: &str, docno: u64) -> Result<Option<MemoryEntry>> {
        let mut e = self.stored_entry(layer, domain, docno)?;
        if let Some(e) = &mut e {
            self.access_into(docno, e)?;
        }
        Ok(e)
    }

    /// Sets the access metadata of `e`, the entry row at `docno`, to what this
    /// snapshot sees of it (its compact record's, pending records included).
    fn access_into(&self, docno: u64, e: &mut MemoryEntry) -> Result<()> {
        match self.docinfo(docno)? {
            Some(info) => info.access_into(e),
            None => self.access.entry(docno, e),
        }
        Ok(())
    }

    /// The entry of `info` (its compact record as [`Reader::docinfo`] returns it)
    /// at `docno`, with the access metadata `info` holds: saves reading the record
    /// again when the caller has it.
    pub fn entry_of(&self, info: &DocInfo, docno: u64) -> Result<Option<MemoryEntry>> {
        let mut e = self.stored_entry(&info.layer, &info.domain, docno)?;
        if let Some(e) = &mut e {
            info.access_into(e);
        }
        Ok(e)
    }

    /// The entry row at `docno` of table `(layer, domain)` as stored: its access
    /// fields are those it was last written with.
    fn stored_entry(&self, layer: &str, domain: &str, docno: u64) -> Result<Option<MemoryEntry>> {
        let mut tables = self.entry_tables.lock();
        let EntryTables { name, open } = &mut *tables;
        name.clear();
        for part in [ENTRY_TABLE_PREFIX, layer, ":", domain] {
            name.push_str(part);
        }
        if let Some(t) = open.get(name.as_str()) {
            return query::entry(t, docno);
        }
        // Not opened yet: the names are checked once, before the first open.
        schema::entry_table_name(layer, domain)?;
        match self.txn.open_table(schema::entry_table(name)) {
            Ok(t) => query::entry(open.entry(name.clone()).or_insert(t), docno),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The entry at `docno`, with its access metadata.
    pub fn get(&self, docno: u64) -> Result<Option<MemoryEntry>> {
        let Some(info) = self.docinfo(docno)? else { return Ok(None) };
        self.entry_of(&info, docno)
    }

    /// Names of every entry table, as `(layer, domain)`.
    pub fn entry_tables(&self) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for h in self.txn.list_tables()? {
            if let Some((l, d)) = schema::parse_entry_table_name(h.name()) {
                out.push((l.to_owned(), d.to_owned()));
            }
        }
        Ok(out)
    }

    /// Every `(docno, entry)` of table `(layer, domain)` in docno order, with
    /// their access metadata.
    pub fn table_entries(&self, layer: &str, domain: &str) -> Result<Vec<(u64, MemoryEntry)>> {
        let mut out = self.table_rows(layer, domain)?;
        for (d, e) in &mut out {
            self.access_into(*d, e)?;
        }
        Ok(out)
    }

    /// As [`Reader::table_entries`], as stored: the access metadata is the
    /// written one, without the access records not written yet (for checking the
    /// entries against the indexes).
    pub fn stored_table_entries(
        &self,
        layer: &str,
        domain: &str,
    ) -> Result<Vec<(u64, MemoryEntry)>> {
        let mut out = self.table_rows(layer, domain)?;
        for (d, e) in &mut out {
            if let Some(info) = query::docinfo(&self.docs, *d)? {
                info.access_into(e);
            }
        }
        Ok(out)
    }

    /// Every `(docno, entry row)` of table `(layer, domain)` in docno order; the
    /// access fields are those each row was last written with.
    fn table_rows(&self, layer: &str, domain: &str) -> Result<Vec<(u64, MemoryEntry)>> {
        let name = schema::entry_table_name(layer, domain)?;
        let table = match self.txn.open_table(schema::entry_table(&name)) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let mut out = Vec::new();
        for row in table.range::<u64>(..)? {
            let (k, v) = row?;
            out.push((k.value(), decode(v.value(), "memory entry")?));
        }
        Ok(out)
    }

    /// Number of entries in table `(layer, domain)`.
    pub fn table_len(&self, layer: &str, domain: &str) -> Result<u64> {
        use redb::ReadableTableMetadata;
        let name = schema::entry_table_name(layer, domain)?;
        match self.txn.open_table(schema::entry_table(&name)) {
            Ok(t) => Ok(t.len()?),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    /// How many memories the layers in `layers` hold, over all their domains'
    /// entry tables (superseded and archived ones included).
    ///
    /// # Errors
    /// Storage errors.
    pub fn layer_memories(&self, layers: &[String]) -> Result<u64> {
        let mut n = 0;
        for (l, d) in self.entry_tables()? {
            if layers.contains(&l) {
                n += self.table_len(&l, &d)?;
            }
        }
        Ok(n)
    }
}
