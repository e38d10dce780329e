//! [`Writer`]: one write transaction with every table open, keeping indexes exact.

use std::sync::atomic::{AtomicU64, Ordering};

use foldhash::{HashMap, HashMapExt, HashSetExt};
use redb::{ReadableTable, ReadableTableMetadata, Table, WriteTransaction};

use super::codec::{decode, decode_self_model, encode, encode_self_model};
use super::docinfo::DocInfo;
use super::keys::{IndexKeys, OWNER_TERM_PREFIX, index_keys, index_keys_with};
use super::schema::{self, *};
use super::{CorpusStats, bitmap, doc_terms, key_sets, meta_keys, postings, query, tail};
use crate::Profile;
use crate::error::{Error, Result};
use crate::model::{MemoryEntry, SelfModel, time};
use crate::text::index_terms;
use crate::text::{TOKENIZER_VERSION, TokenHashes};

type Str = &'static str;
type Bytes = &'static [u8];

/// A write transaction with every table open.
pub struct Writer<'t> {
    profile: Profile,
    txn: &'t WriteTransaction,
    pub(crate) meta: Table<'t, Str, Bytes>,
    pub(crate) ids: Table<'t, Str, u64>,
    pub(crate) docs: Table<'t, u64, Bytes>,
    postings: Table<'t, (Str, u64), Bytes>,
    pub(crate) fact_tokens: Table<'t, (Str, Str, u64), ()>,
    pub(crate) prefixes: Table<'t, (Str, Str, Str, u64), ()>,
    pub(crate) attributes: Table<'t, (Str, Str, Str, u64), ()>,
    pub(crate) fact_cards: Table<'t, (Str, u64), Bytes>,
    pub(crate) entities: Table<'t, (Str, u64), ()>,
    pub(crate) user_terms: Table<'t, (Str, u64), Bytes>,
    /// Owners without `user_terms` rows (see [`doc_terms::ROW_CAP`]).
    rowless: Table<'t, Str, ()>,
    pub(crate) importance: Table<'t, (Str, u8, i64, u64), ()>,
    pub(crate) layer_order: Table<'t, (Str, u64), ()>,
    /// Every memory's scopes (see [`schema::SCOPES`]).
    scopes: Table<'t, (Str, u64), ()>,
    pub(crate) context: Table<'t, u64, Str>,
    pub(crate) embeddings: Table<'t, u64, Bytes>,
    /// The postings of the newest memories, not yet in `postings` (see
    /// [`super::tail`]).
    tail: Table<'t, u64, Bytes>,
    /// The bitmaps ([`bitmap::BITMAPS`]), each with this transaction's changes
    /// (written by [`Writer::flush`]) and what marks a memory in it.
    bitmaps: Vec<(Table<'t, u64, Bytes>, bitmap::Marks, bitmap::Marker)>,
    /// The first docno this transaction gives out: buffered postings of memories
    /// from here on are new and may go to the tail.
    first_new: u64,
    /// The `layer_order` and `scopes` keys whose rows changed other than by a
    /// new memory's: they get new epochs at flush (see [`super::key_sets`]).
    key_bumps: key_sets::Bumps,
    /// What this transaction has done to the tail (a new version is stored at
    /// flush when it changed).
    tail_writes: tail::TailWrites,
    /// What it did to the tail, once flushed: the new version and the change.
    tail_done: (u64, tail::TailChange),
    /// Memories the tail may hold before this transaction merges it.
    tail_caps: tail::Caps,
    /// The `user_terms` rows of memories indexed in this transaction, by docno,
    /// with their owners: written with their postings to the blocks, dropped
    /// when their postings go to the tail (which holds the same, see
    /// [`doc_terms`]).
    new_rows: std::collections::BTreeMap<u64, (String, Vec<u8>)>,
    /// Memories whose rows this transaction removed: a merge of the tail
    /// writes no row for them from their (older) tail rows.
    rows_removed: foldhash::HashSet<u64>,
    entry_tables: HashMap<String, Table<'t, u64, Bytes>>,
    pub(super) stats: CorpusStats,
    /// The statistics as stored when the transaction began (`None`: no row), so
    /// [`Writer::flush`] rewrites the row only when they changed (a recall's access
    /// update leaves them, and the `meta` pages, untouched).
    stored_stats: Option<CorpusStats>,
    /// Posting and document-frequency changes not written yet: applied term by term
    /// by [`Writer::flush`], so each touched block is rewritten once per transaction.
    /// Reads of postings inside a write transaction go through
    /// [`Writer::term_docnos`], which applies the term's changes first.
    pending: postings::Pending,
    /// The self-model as read or updated in this transaction (written by
    /// [`Writer::flush`] when `self_model_dirty`): a batch of observes decodes and
    /// encodes it once, and consecutive transactions decode it once ([`Carry`]).
    self_model: Option<SelfModel>,
    self_model_dirty: bool,
    /// `(id, content)` of entries read through [`Writer::id_and_content`] in this
    /// transaction; dropped when the entry is replaced or removed.
    texts: HashMap<u64, (String, String)>,
    /// Token sets derived from entries' contents ([`Writer::token_set`]), keyed
    /// like `texts` and dropped with it.
    token_sets: HashMap<u64, TokenSet>,
    /// `(window, newest episodic (docno, created µs), newest docno first)`, kept
    /// through the transaction by [`Writer::newest_episodes`].
    newest_episodes: Option<(usize, Vec<(u64, i64)>)>,
    /// [`DocInfo`] records read or written in this transaction (observe orders the
    /// same candidate facts several times); every write to `docs` updates it.
    doc_cache: std::cell::RefCell<HashMap<u64, DocInfo>>,
    /// The fact-index changes of this transaction, when recorded
    /// ([`Writer::record_fact_changes`]).
    fact_changes: Option<FactChanges>,
    /// The knowledge graph's tables, opened on first use ([`Writer::graph`]) and
    /// kept open for the rest of the transaction.
    graph: Option<super::graph::GraphTables<'t>>,
}

/// What a write transaction changed in the fact index (`fact_tokens` and
/// `fact_cards`), so that lookups read from a snapshot of the store as the
/// transaction began can be brought up to date ([`crate::write::near`]).
#[derive(Debug, Default)]
pub(crate) struct FactChanges {
    /// Partition → token → docno → whether its `fact_tokens` row exists now.
    rows: foldhash::HashMap<String, foldhash::HashMap<String, foldhash::HashMap<u64, bool>>>,
    /// Partition → docnos whose card was written or removed.
    cards: foldhash::HashMap<String, foldhash::HashSet<u64>>,
}

impl FactChanges {
    /// The `fact_tokens` rows of `token` in `part` this transaction added (`true`)
    /// or removed (`false`), by docno.
    pub(crate) fn rows(&self, part: &str, token: &str) -> Option<&foldhash::HashMap<u64, bool>> {
        self.rows.get(part)?.get(token)
    }

    /// Did this transaction write or remove the card of `docno` in `part`?
    pub(crate) fn card_changed(&self, part: &str, docno: u64) -> bool {
        self.cards.get(part).is_some_and(|d| d.contains(&docno))
    }

    fn note_rows<'a>(
        &mut self,
        part: &str,
        tokens: impl IntoIterator<Item = &'a str>,
        docno: u64,
        exists: bool,
    ) {
        let by_token = self.rows.entry(part.to_owned()).or_default();
        for t in tokens {
            by_token.entry(t.to_owned()).or_default().insert(docno, exists);
        }
    }

    fn note_card(&mut self, part: &str, docno: u64) {
        self.cards.entry(part.to_owned()).or_default().insert(docno);
    }
}

const EPISODIC: &str = "episodic";

/// The derived state a [`Writer`] hands to the next write transaction once its own
/// has committed: the decoded self-model, the newest episodes and their novelty
/// token sets. A single observe per transaction would otherwise decode the
/// self-model and re-tokenize the ten newest episodes every time. Every write
/// goes through a `Writer`, which keeps these current as it writes, so a carry
/// taken from a committed transaction describes exactly the committed store.
#[derive(Default)]
pub(crate) struct Carry {
    self_model: Option<SelfModel>,
    newest_episodes: Option<(usize, Vec<(u64, i64)>)>,
    token_sets: HashMap<u64, TokenSet>,
}

/// A set of tokens derived from an entry's content, as their hashes, shared
/// without copying.
pub(crate) type TokenSet = std::sync::Arc<TokenHashes>;

/// Buffered posting changes at which a transaction writes them out before its
/// commit (about 100 MB of buffer).
const PENDING_MAX: usize = 2_000_000;

/// Which of a memory's index rows [`Writer::remove_rows`] and
/// [`Writer::add_rows`] leave as they are: in a replace, those whose keys are the
/// same before and after. Taking them out and putting them back would rewrite
/// their leaves (a memory's postings blocks, its `user_terms`, `importance` and
/// `layer_order` rows, wherever they are in their tables) for nothing, and any
/// postings change merges the postings tail.
#[derive(Debug, Clone, Copy)]
pub(super) struct Unchanged {
    postings: bool,
    facts: bool,
    entities: bool,
    user: bool,
    importance: bool,
    layer: bool,
    scope: bool,
}

impl Unchanged {
    /// Every row is written: an insert or a removal.
    pub(super) const NOTHING: Unchanged = Unchanged {
        postings: false,
        facts: false,
        entities: false,
        user: false,
        importance: false,
        layer: false,
        scope: false,
    };

    /// The rows that `old` (with `old_keys`) and `new` (with `new_keys`) share.
    fn between(
        old: &MemoryEntry,
        old_keys: &IndexKeys,
        new: &MemoryEntry,
        new_keys: &IndexKeys,
    ) -> Self {
        let owner = old.user_id == new.user_id;
        Unchanged {
            postings: old_keys.tokens == new_keys.tokens && old_keys.doc_len == new_keys.doc_len,
            facts: owner
                && old.domain == new.domain
                && old_keys.fact_tokens == new_keys.fact_tokens
                && old_keys.card == new_keys.card
                && old_keys.slots == new_keys.slots
                && old_keys.attributes == new_keys.attributes,
            entities: old_keys.entities == new_keys.entities,
            user: owner,
            importance: old.layer == new.layer
                && old.importance == new.importance
                && old.created_at == new.created_at,
            layer: old.layer == new.layer,
            scope: old.scope == new.scope,
        }
    }
}

/// The distinct scopes of a memory's `scope`, each with a row in
/// [`schema::SCOPES`].
pub(super) fn scope_keys(scope: &[String]) -> std::collections::BTreeSet<&str> {
    scope.iter().map(String::as_str).collect()
}

/// A new memory id: 12 hex digits, as soul-protocol's, but ordered by time: the
/// seconds since 1970 (32 bits, to 2106), then a 16-bit counter that starts at a
/// random point in its lower half with each new second (and counts on into the
/// next second's range when a second makes more ids than that). Ids made one
/// after another thus sort one after another, and the `ids` index takes a batch
/// of them in a few leaves at one place instead of a leaf each, scattered over
/// the table (at 1M memories, ~1,100 leaves for 1,250 random ids). Only the first
/// id of a second draws randomness. Callers still check that the id is free (an
/// id restored from another store may hold it).
fn new_id() -> String {
    static LAST: AtomicU64 = AtomicU64::new(0);
    const MASK: u64 = (1 << 48) - 1;
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut start = None;
    let mut next = 0;
    // The closure only computes (it may run again if another thread got there
    // first); `next` keeps what was stored.
    let _ = LAST.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
        next = if last >> 16 >= secs {
            last + 1
        } else {
            (secs << 16)
                | *start.get_or_insert_with(|| uuid::Uuid::new_v4().as_u64_pair().0 & 0x7fff)
        } & MASK;
        Some(next)
    });
    hex12(next)
}

/// `n`'s low 48 bits as 12 lower-case hex digits (`format!("{n:012x}")` for an
/// `n` below 2^48, without the formatting machinery).
fn hex12(n: u64) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    (0..12).rev().map(|i| char::from(DIGITS[((n >> (4 * i)) & 0xf) as usize])).collect()
}

impl<'t> Writer<'t> {
    /// Creates every fixed table and the meta rows of a new store.
    pub(crate) fn create_all(txn: &'t WriteTransaction, profile: Profile) -> Result<()> {
        {
            let mut meta = txn.open_table(META)?;
            meta.insert(meta_keys::SCHEMA, SCHEMA_VERSION.to_le_bytes().as_slice())?;
            meta.insert(meta_keys::TOKENIZER, TOKENIZER_VERSION.to_le_bytes().as_slice())?;
            meta.insert(meta_keys::PROFILE, profile.as_str().as_bytes())?;
            meta.insert(meta_keys::STATS, encode(&CorpusStats::default())?.as_slice())?;
        }
        txn.open_table(GRAPH_NODES)?;
        txn.open_table(GRAPH_EDGES)?;
        txn.open_table(GRAPH_ADJ)?;
        txn.open_table(GRAPH_ACTIVE)?;
        txn.open_table(EVENTS)?;
        txn.open_table(ARCHIVES)?;
        txn.open_table(DELETION_AUDIT)?;
        txn.open_table(SUPERSEDE_AUDIT)?;
        // The remaining tables are opened (and so created) by `open`.
        Ok(())
    }

    /// Opens every table of the store inside `txn`.
    pub(crate) fn open(txn: &'t WriteTransaction, profile: Profile) -> Result<Self> {
        let meta = txn.open_table(META)?;
        let stored_stats: Option<CorpusStats> = match meta.get(meta_keys::STATS)? {
            Some(v) => Some(decode(v.value(), "corpus stats")?),
            None => None,
        };
        let stats = stored_stats.unwrap_or_default();
        Ok(Self {
            profile,
            txn,
            meta,
            ids: txn.open_table(IDS)?,
            docs: txn.open_table(DOCS)?,
            postings: txn.open_table(POSTINGS)?,
            fact_tokens: txn.open_table(FACT_TOKENS)?,
            prefixes: txn.open_table(PREFIXES)?,
            attributes: txn.open_table(ATTRIBUTES)?,
            fact_cards: txn.open_table(FACT_CARDS)?,
            entities: txn.open_table(ENTITIES)?,
            user_terms: txn.open_table(USER_TERMS)?,
            rowless: txn.open_table(ROWLESS)?,
            importance: txn.open_table(IMPORTANCE)?,
            layer_order: txn.open_table(LAYER_ORDER)?,
            scopes: txn.open_table(SCOPES)?,
            context: txn.open_table(CONTEXT)?,
            embeddings: txn.open_table(EMBEDDINGS)?,
            tail: txn.open_table(POSTING_TAIL)?,
            bitmaps: bitmap::BITMAPS
                .iter()
                .map(|(def, marker)| Ok((txn.open_table(*def)?, bitmap::Marks::default(), *marker)))
                .collect::<Result<_>>()?,
            first_new: stats.next_docno,
            key_bumps: key_sets::Bumps::default(),
            tail_writes: tail::TailWrites::default(),
            tail_done: (0, tail::TailChange::Unchanged),
            tail_caps: tail::Caps::default(),
            new_rows: std::collections::BTreeMap::new(),
            rows_removed: foldhash::HashSet::new(),
            entry_tables: HashMap::new(),
            stats,
            stored_stats,
            pending: postings::Pending::default(),
            self_model: None,
            self_model_dirty: false,
            texts: HashMap::new(),
            token_sets: HashMap::new(),
            newest_episodes: None,
            doc_cache: std::cell::RefCell::new(HashMap::new()),
            fact_changes: None,
            graph: None,
        })
    }

    /// Gives every `layer_order` and `scopes` key a new epoch at flush (the
    /// indexes are rebuilt): no kept set of their members is used again.
    pub(crate) fn renew_key_sets(&mut self) {
        self.key_bumps.all();
    }

    /// Sets how many memories the postings tail may hold before this transaction
    /// merges it into the blocks.
    pub(crate) fn set_tail_caps(&mut self, caps: tail::Caps) {
        self.tail_caps = caps;
    }

    /// Starts from what the previous committed transaction kept.
    pub(crate) fn resume(&mut self, carry: Carry) {
        self.self_model = carry.self_model;
        self.newest_episodes = carry.newest_episodes;
        self.token_sets = carry.token_sets;
    }

    /// What the flushed transaction did to the postings tail: the version it
    /// stored and the change (for the store's [`tail::TailCache`]).
    pub(crate) fn take_tail_change(&mut self) -> (u64, tail::TailChange) {
        std::mem::take(&mut self.tail_done)
    }

    /// What the next transaction may start from, once this one has committed
    /// (after [`Writer::flush`]): token sets only of the newest episodes.
    pub(crate) fn into_carry(mut self) -> Carry {
        let mut token_sets = HashMap::new();
        if let Some((_, list)) = &self.newest_episodes {
            for (d, _) in list {
                if let Some(set) = self.token_sets.remove(d) {
                    token_sets.insert(*d, set);
                }
            }
        }
        Carry {
            self_model: self.self_model.take(),
            newest_episodes: self.newest_episodes.take(),
            token_sets,
        }
    }

    /// Writes buffered postings, the self-model (when changed) and the corpus
    /// statistics. Called before commit.
    pub(crate) fn flush(&mut self) -> Result<()> {
        for (table, marks, _) in &mut self.bitmaps {
            marks.write(table)?;
        }
        self.key_bumps.write(&mut self.meta)?;
        if !self.pending.is_empty() {
            // Memories numbered in this transaction (an upper bound of those with
            // buffered postings).
            let new_docs = self.stats.next_docno.saturating_sub(self.first_new);
            let held = self.tail.len()?;
            let cap = self.tail_caps.for_write(self.stats.docs, held, new_docs);
            if self.pending.only_adds_from(self.first_new) && held + new_docs <= cap {
                for (docno, doc) in self.pending.take_by_doc() {
                    let stored = encode(&doc)?;
                    self.tail.insert(docno, stored.as_slice())?;
                    self.new_rows.remove(&docno);
                    self.tail_writes.add(docno, stored.into_boxed_slice());
                }
            } else {
                self.apply_pending()?;
            }
        }
        // Rows of memories whose postings an earlier apply (inside the
        // transaction) wrote to the blocks.
        let rows = std::mem::take(&mut self.new_rows);
        self.write_rows(rows)?;
        if self.tail_writes.changed() {
            let prev = match self.meta.get(meta_keys::TAIL_VERSION)? {
                Some(v) => tail::decode_version(v.value())?,
                None => 0,
            };
            let version = if self.tail.len()? == 0 { 0 } else { tail::new_version() };
            self.meta.insert(meta_keys::TAIL_VERSION, version.to_le_bytes().as_slice())?;
            self.tail_done = (version, self.tail_writes.finish(prev));
        }
        if self.self_model_dirty
            && let Some(model) = &self.self_model
        {
            self.meta.insert(meta_keys::SELF_MODEL, encode_self_model(model)?.as_slice())?;
            self.self_model_dirty = false;
        }
        if self.stored_stats != Some(self.stats) {
            self.meta.insert(meta_keys::STATS, encode(&self.stats)?.as_slice())?;
            self.stored_stats = Some(self.stats);
        }
        Ok(())
    }

    /// The store's profile.
    #[must_use]
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// The underlying transaction (for tables outside the memory indexes).
    #[must_use]
    pub fn txn(&self) -> &'t WriteTransaction {
        self.txn
    }

    /// The knowledge graph's tables, opened by the first call in the transaction.
    /// Write-side code reaches the graph only through them: redb refuses to open a
    /// table that is already open.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn graph(&mut self) -> Result<&mut super::graph::GraphTables<'t>> {
        let tables = match self.graph.take() {
            Some(g) => g,
            None => super::graph::GraphTables {
                nodes: self.txn.open_table(GRAPH_NODES)?,
                edges: self.txn.open_table(GRAPH_EDGES)?,
                adj: self.txn.open_table(GRAPH_ADJ)?,
                active: self.txn.open_table(GRAPH_ACTIVE)?,
            },
        };
        Ok(self.graph.insert(tables))
    }

    /// Corpus statistics as of this point in the transaction.
    #[must_use]
    pub fn stats(&self) -> CorpusStats {
        self.stats
    }

    /// The next sequence number for edges, archives and audit records.
    pub fn next_seq(&mut self) -> u64 {
        let s = self.stats.next_seq;
        self.stats.next_seq += 1;
        s
    }

    pub(super) fn entry_table(
        &mut self,
        layer: &str,
        domain: &str,
    ) -> Result<&mut Table<'t, u64, Bytes>> {
        let name = schema::entry_table_name(layer, domain)?;
        if !self.entry_tables.contains_key(&name) {
            let table = self.txn.open_table(schema::entry_table(&name))?;
            self.entry_tables.insert(name.clone(), table);
        }
        self.entry_tables
            .get_mut(&name)
            .ok_or_else(|| Error::Storage("entry table vanished".into()))
    }

    /// Reads a meta value.
    pub fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.meta.get(key)?.map(|v| v.value().to_vec()))
    }

    /// Writes a meta value.
    pub fn meta_put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        self.meta.insert(key, value)?;
        Ok(())
    }

    /// Writes the access records `log` holds after the store's last written one,
    /// up to number `upto` (removed memories are skipped), and records the number of
    /// the last written. Returns it.
    pub(crate) fn apply_access(
        &mut self,
        log: &super::access_log::AccessLog,
        upto: u64,
    ) -> Result<u64> {
        if upto == 0 || log.is_empty() {
            // Nothing to write (a plain write asks for none): the stored number
            // stays current.
            return Ok(0);
        }
        let applied = super::access_applied(
            self.meta.get(super::meta_keys::ACCESS_APPLIED)?.as_ref().map(|v| v.value()),
        )?;
        let (pending, upto) = log.unapplied(applied, upto);
        if pending.is_empty() {
            return Ok(applied);
        }
        let cap = log.cap();
        for (docno, times) in pending {
            // Access metadata lives in the compact record (schema 6): only that
            // is rewritten, not the entry.
            let Some(mut info) = self.docinfo(docno)? else { continue };
            info.record_accesses(times.iter().map(crate::model::time::to_micros), cap);
            self.put_access(docno, info)?;
        }
        self.meta_put(super::meta_keys::ACCESS_APPLIED, &upto.to_le_bytes())?;
        Ok(upto)
    }

    /// The docno of memory `id`.
    pub fn docno_of(&self, id: &str) -> Result<Option<u64>> {
        query::docno_of(&self.ids, id)
    }

    /// The compact record of `docno`.
    pub fn docinfo(&self, docno: u64) -> Result<Option<DocInfo>> {
        if let Some(info) = self.doc_cache.borrow().get(&docno) {
            return Ok(Some(info.clone()));
        }
        let info = query::docinfo(&self.docs, docno)?;
        if let Some(i) = &info {
            self.doc_cache.borrow_mut().insert(docno, i.clone());
        }
        Ok(info)
    }

    /// The entry at `docno`, with the access metadata of its compact record.
    pub fn get(&mut self, docno: u64) -> Result<Option<MemoryEntry>> {
        let Some(info) = self.docinfo(docno)? else { return Ok(None) };
        let table = self.entry_table(&info.layer, &info.domain)?;
        let mut e = query::entry(table, docno)?;
        if let Some(e) = &mut e {
            info.access_into(e);
        }
        Ok(e)
    }

    /// Inserts a new entry (an empty id gets a fresh one). Returns its docno.
    pub fn insert(&mut self, entry: MemoryEntry) -> Result<u64> {
        self.insert_with_context(entry, None)
    }

    /// The conversation context stored with `docno`.
    pub fn context_of(&self, docno: u64) -> Result<Option<String>> {
        Ok(self.context.get(docno)?.map(|v| v.value().to_owned()))
    }

    /// Inserts a new entry with the conversation context it was written in (indexed
    /// at half weight). Returns its docno.
    pub fn insert_with_context(
        &mut self,
        entry: MemoryEntry,
        context: Option<&str>,
    ) -> Result<u64> {
        let context_terms: Vec<Vec<String>> = context.map(index_terms).into_iter().collect();
        self.insert_indexed(entry, context.map(|c| (c, context_terms.as_slice())), None)
    }

    /// [`Writer::insert_with_context`] with index terms computed ahead: those of
    /// `content`, used when the entry's (normalized) content is `content`, and
    /// the context's, in parts (see [`index_keys_with`]).
    ///
    /// # Errors
    /// As [`Writer::insert_with_context`].
    pub(crate) fn insert_indexed<T: AsRef<[String]>>(
        &mut self,
        mut entry: MemoryEntry,
        context: Option<(&str, &[T])>,
        terms: Option<(&str, Vec<String>)>,
    ) -> Result<u64> {
        entry.normalize();
        entry.validate().map_err(Error::InvalidMemory)?;
        schema::entry_table_name(&entry.layer, &entry.domain)?;
        let docno = self.stats.next_docno;
        if entry.id.is_empty() {
            entry.id = self.claim_new_id(docno, new_id)?;
        } else if self.docno_of(&entry.id)?.is_some() {
            return Err(Error::DuplicateId(entry.id));
        } else {
            self.ids.insert(entry.id.as_str(), docno)?;
        }
        self.stats.next_docno += 1;
        let context = context.filter(|(c, _)| !c.trim().is_empty());
        if let Some((c, _)) = context {
            self.context.insert(docno, c)?;
        }
        let terms = terms.filter(|(content, _)| *content == entry.content).map(|(_, t)| t);
        let keys = index_keys_with(&entry, self.profile, terms, context.map_or(&[], |(_, t)| t));
        self.add_rows(docno, &entry, &keys, Unchanged::NOTHING)?;
        let record = encode(&entry)?;
        self.entry_table(&entry.layer, &entry.domain)?.insert(docno, record.as_slice())?;
        Ok(docno)
    }

    /// Maps the first id `next` makes that no memory holds to `docno`, and
    /// returns it. A new id is free unless a restored memory holds it: the
    /// insert itself tells (and the holder gets its docno back), so a new memory
    /// costs one lookup in `ids`, not two.
    fn claim_new_id(&mut self, docno: u64, mut next: impl FnMut() -> String) -> Result<String> {
        loop {
            let id = next();
            let held = self.ids.insert(id.as_str(), docno)?.map(|v| v.value());
            match held {
                None => return Ok(id),
                Some(held) => {
                    self.ids.insert(id.as_str(), held)?;
                }
            }
        }
    }

    /// Inserts many new entries at once, with their index keys already computed
    /// (`keys[i]` = [`index_keys`] of `entries[i]` after [`MemoryEntry::normalize`]):
    /// the bulk-load path of restores. Every index ends up exactly as with one
    /// [`Writer::insert`] per entry, but each table is written in key order and the
    /// term counters once per batch, which is several times faster. Returns the
    /// docnos, in order.
    pub(crate) fn insert_many(
        &mut self,
        mut entries: Vec<MemoryEntry>,
        keys: &[IndexKeys],
    ) -> Result<Vec<u64>> {
        use std::collections::HashSet;
        if entries.len() != keys.len() {
            return Err(Error::Storage("insert_many: one key set per entry".into()));
        }
        let mut seen: HashSet<String> = HashSet::new();
        let mut docnos = Vec::with_capacity(entries.len());
        // Rows are written directly below, not through `add_rows`.
        self.newest_episodes = None;
        for e in &mut entries {
            e.normalize();
            e.validate().map_err(Error::InvalidMemory)?;
            schema::entry_table_name(&e.layer, &e.domain)?;
            if e.id.is_empty() {
                e.id = new_id();
                while seen.contains(&e.id) || self.docno_of(&e.id)?.is_some() {
                    e.id = new_id();
                }
            } else if seen.contains(&e.id) || self.docno_of(&e.id)?.is_some() {
                return Err(Error::DuplicateId(e.id.clone()));
            }
            seen.insert(e.id.clone());
            docnos.push(self.stats.next_docno);
            self.stats.next_docno += 1;
        }
        let rows = entries.iter().zip(keys).zip(&docnos);

        let mut ids: Vec<(&str, u64)> =
            entries.iter().map(|e| e.id.as_str()).zip(docnos.iter().copied()).collect();
        ids.sort_unstable();
        for (id, d) in ids {
            self.ids.insert(id, d)?;
        }
        for ((e, k), &d) in rows.clone() {
            self.put_info(d, DocInfo::from_entry(e, k.doc_len))?;
            self.stats.docs += 1;
            self.stats.total_len += u64::from(k.doc_len);
        }
        // Postings go through the transaction's buffer: each term's blocks are
        // written once, at flush.
        for ((_, k), &d) in rows.clone() {
            for (t, tf) in &k.tokens {
                self.pending.add(t, d, *tf, k.doc_len);
            }
            self.bound_pending()?;
        }
        let parts: Vec<String> = entries
            .iter()
            .map(|e| schema::fact_partition(e.user_id.as_deref(), &e.domain))
            .collect();
        let mut ftok: Vec<(&str, &str, u64)> = Vec::new();
        let mut cards: Vec<((&str, u64), Vec<u8>)> = Vec::new();
        let mut slots: Vec<(&str, &str, &str, u64)> = Vec::new();
        let mut attrs: Vec<(&str, &str, &str, u64)> = Vec::new();
        let mut ents: Vec<(&str, u64)> = Vec::new();
        let mut imp: Vec<(&str, u8, i64, u64)> = Vec::new();
        let mut order: Vec<(&str, u64)> = Vec::new();
        let mut scoped: Vec<(&str, u64)> = Vec::new();
        for (((e, k), &d), part) in rows.clone().zip(&parts) {
            for t in &k.fact_tokens {
                ftok.push((part.as_str(), t.as_str(), d));
            }
            if let Some(card) = &k.card {
                cards.push(((part.as_str(), d), encode(card)?));
            }
            let user = e.user_id.as_deref().unwrap_or("");
            for sl in &k.slots {
                slots.push((sl.as_str(), user, e.domain.as_str(), d));
            }
            for a in &k.attributes {
                attrs.push((a.as_str(), user, e.domain.as_str(), d));
            }
            for en in &k.entities {
                ents.push((en.as_str(), d));
            }
            let owner = e.user_id.as_deref().unwrap_or("").to_owned();
            self.new_rows.insert(d, (owner, doc_terms::encode(k)));
            imp.push((e.layer.as_str(), e.importance, time::to_micros(&e.created_at), d));
            order.push((e.layer.as_str(), d));
            scoped.extend(scope_keys(&e.scope).into_iter().map(|sc| (sc, d)));
        }
        ftok.sort_unstable();
        for &(part, t, d) in &ftok {
            self.fact_tokens.insert((part, t, d), ())?;
            if let Some(c) = &mut self.fact_changes {
                c.note_rows(part, [t], d, true);
            }
        }
        drop(ftok);
        cards.sort_unstable_by_key(|(k, _)| *k);
        for (k, card) in cards {
            self.fact_cards.insert(k, card.as_slice())?;
            if let Some(c) = &mut self.fact_changes {
                c.note_card(k.0, k.1);
            }
        }
        slots.sort_unstable();
        for k in slots {
            self.prefixes.insert(k, ())?;
        }
        attrs.sort_unstable();
        for k in attrs {
            self.attributes.insert(k, ())?;
        }
        ents.sort_unstable();
        for k in ents {
            self.entities.insert(k, ())?;
        }
        imp.sort_unstable();
        for k in imp {
            self.importance.insert(k, ())?;
        }
        order.sort_unstable();
        for k in order {
            self.layer_order.insert(k, ())?;
        }
        scoped.sort_unstable();
        for k in scoped {
            self.scopes.insert(k, ())?;
        }
        for (e, &d) in entries.iter().zip(&docnos) {
            let record = encode(e)?;
            self.entry_table(&e.layer, &e.domain)?.insert(d, record.as_slice())?;
        }
        Ok(docnos)
    }

    /// Replaces the entry at `docno` (same id), moving it between tables when its
    /// layer or domain changed and rewriting exactly the index rows that differ.
    pub fn replace(&mut self, docno: u64, mut entry: MemoryEntry) -> Result<()> {
        entry.normalize();
        entry.validate().map_err(Error::InvalidMemory)?;
        schema::entry_table_name(&entry.layer, &entry.domain)?;
        let old = self.get(docno)?.ok_or_else(|| Error::NotFound(entry.id.clone()))?;
        self.forget_texts(docno);
        if old.id != entry.id {
            return Err(Error::InvalidInput(format!(
                "cannot change a memory's id ({:?} to {:?})",
                old.id, entry.id
            )));
        }
        // Fast path (access updates after a recall): nothing an index row derives
        // from changed, so neither entry needs tokenizing again.
        if old.content == entry.content
            && old.entities == entry.entities
            && old.layer == entry.layer
            && old.domain == entry.domain
            && old.user_id == entry.user_id
            && old.importance == entry.importance
            && old.created_at == entry.created_at
            && old.scope == entry.scope
            && old.is_superseded() == entry.is_superseded()
            && let Some(info) = self.docinfo(docno)?
        {
            self.put_info(docno, DocInfo::from_entry(&entry, info.doc_len))?;
            let record = encode(&entry)?;
            self.entry_table(&entry.layer, &entry.domain)?.insert(docno, record.as_slice())?;
            return Ok(());
        }
        let context = self.context_of(docno)?;
        let old_keys = index_keys(&old, self.profile, context.as_deref());
        let new_keys = index_keys(&entry, self.profile, context.as_deref());
        if old_keys == new_keys
            && old.layer == entry.layer
            && old.domain == entry.domain
            && old.user_id == entry.user_id
            && old.importance == entry.importance
            && old.created_at == entry.created_at
            && old.scope == entry.scope
        {
            // Only the record and its compact twin change (e.g. access metadata).
            self.put_info(docno, DocInfo::from_entry(&entry, new_keys.doc_len))?;
        } else {
            // Only the rows whose keys change (a supersede keeps the postings,
            // the owner, importance and layer rows; a new importance keeps the
            // postings).
            let same = Unchanged::between(&old, &old_keys, &entry, &new_keys);
            self.remove_rows(docno, &old, &old_keys, same, false)?;
            self.add_rows(docno, &entry, &new_keys, same)?;
        }
        if old.layer != entry.layer || old.domain != entry.domain {
            self.entry_table(&old.layer, &old.domain)?.remove(docno)?;
        }
        let record = encode(&entry)?;
        self.entry_table(&entry.layer, &entry.domain)?.insert(docno, record.as_slice())?;
        Ok(())
    }

    /// Removes the entry at `docno` and every index row of it. Returns the entry.
    pub fn remove(&mut self, docno: u64) -> Result<Option<MemoryEntry>> {
        let Some(old) = self.get(docno)? else { return Ok(None) };
        let context = self.context_of(docno)?;
        let keys = index_keys(&old, self.profile, context.as_deref());
        self.remove_rows(docno, &old, &keys, Unchanged::NOTHING, true)?;
        self.context.remove(docno)?;
        self.embeddings.remove(docno)?;
        self.entry_table(&old.layer, &old.domain)?.remove(docno)?;
        self.ids.remove(old.id.as_str())?;
        Ok(Some(old))
    }

    pub(super) fn add_rows(
        &mut self,
        docno: u64,
        e: &MemoryEntry,
        keys: &IndexKeys,
        same: Unchanged,
    ) -> Result<()> {
        if e.layer == EPISODIC
            && let Some((window, list)) = &mut self.newest_episodes
        {
            if list.first().is_none_or(|f| docno > f.0) {
                list.insert(0, (docno, time::to_micros(&e.created_at)));
                list.truncate(*window);
            } else {
                self.newest_episodes = None;
            }
        }
        self.put_info(docno, DocInfo::from_entry(e, keys.doc_len))?;
        if !same.postings {
            let terms = keys.tokens.iter().map(|(t, tf)| (t.as_str(), *tf));
            self.pending.add_doc(docno, keys.doc_len, terms);
            self.bound_pending()?;
        }
        self.stats.docs += 1;
        self.stats.total_len += u64::from(keys.doc_len);
        let user = e.user_id.as_deref().unwrap_or("");
        if !same.facts {
            let part = schema::fact_partition(e.user_id.as_deref(), &e.domain);
            for tok in &keys.fact_tokens {
                self.fact_tokens.insert((part.as_str(), tok.as_str(), docno), ())?;
            }
            if let Some(card) = &keys.card {
                self.fact_cards.insert((part.as_str(), docno), encode(card)?.as_slice())?;
            }
            if let Some(c) = &mut self.fact_changes {
                c.note_rows(&part, keys.fact_tokens.iter().map(String::as_str), docno, true);
                if keys.card.is_some() {
                    c.note_card(&part, docno);
                }
            }
            for slot in &keys.slots {
                self.prefixes.insert((slot.as_str(), user, e.domain.as_str(), docno), ())?;
            }
            for attr in &keys.attributes {
                self.attributes.insert((attr.as_str(), user, e.domain.as_str(), docno), ())?;
            }
        }
        if !same.entities {
            for ent in &keys.entities {
                self.entities.insert((ent.as_str(), docno), ())?;
            }
        }
        if !same.user || !same.postings {
            self.new_rows.insert(docno, (user.to_owned(), doc_terms::encode(keys)));
        }
        if !same.importance {
            let created = time::to_micros(&e.created_at);
            self.importance.insert((e.layer.as_str(), e.importance, created, docno), ())?;
        }
        // A memory numbered before this transaction joins its keys' members
        // below where a kept set ends.
        let stored_before = docno < self.first_new;
        if !same.layer {
            self.layer_order.insert((e.layer.as_str(), docno), ())?;
            if stored_before {
                self.key_bumps.key(key_sets::Index::Layers, &e.layer);
            }
        }
        if !same.scope {
            for sc in scope_keys(&e.scope) {
                self.scopes.insert((sc, docno), ())?;
                if stored_before {
                    self.key_bumps.key(key_sets::Index::Scopes, sc);
                }
            }
        }
        Ok(())
    }

    /// Removes the index rows of the memory at `docno` (`e`, with `keys`) but
    /// those `same` keeps; `gone` when the memory leaves the store.
    fn remove_rows(
        &mut self,
        docno: u64,
        e: &MemoryEntry,
        keys: &IndexKeys,
        same: Unchanged,
        gone: bool,
    ) -> Result<()> {
        self.forget_texts(docno);
        if e.layer == EPISODIC {
            self.newest_episodes = None;
        }
        self.docs.remove(docno)?;
        for (table, marks, _) in &mut self.bitmaps {
            marks.set(table, docno, false)?;
        }
        self.doc_cache.get_mut().remove(&docno);
        if !same.postings {
            for (tok, _) in &keys.tokens {
                self.pending.remove(tok, docno);
            }
        }
        self.stats.docs = self.stats.docs.saturating_sub(1);
        self.stats.total_len = self.stats.total_len.saturating_sub(u64::from(keys.doc_len));
        let user = e.user_id.as_deref().unwrap_or("");
        if !same.facts {
            let part = schema::fact_partition(e.user_id.as_deref(), &e.domain);
            for tok in &keys.fact_tokens {
                self.fact_tokens.remove((part.as_str(), tok.as_str(), docno))?;
            }
            if keys.card.is_some() {
                self.fact_cards.remove((part.as_str(), docno))?;
            }
            if let Some(c) = &mut self.fact_changes {
                c.note_rows(&part, keys.fact_tokens.iter().map(String::as_str), docno, false);
                if keys.card.is_some() {
                    c.note_card(&part, docno);
                }
            }
            for slot in &keys.slots {
                self.prefixes.remove((slot.as_str(), user, e.domain.as_str(), docno))?;
            }
            for attr in &keys.attributes {
                self.attributes.remove((attr.as_str(), user, e.domain.as_str(), docno))?;
            }
        }
        if !same.entities {
            for ent in &keys.entities {
                self.entities.remove((ent.as_str(), docno))?;
            }
        }
        if !same.user || !same.postings {
            self.user_terms.remove((user, docno))?;
            self.new_rows.remove(&docno);
            self.rows_removed.insert(docno);
        }
        if !same.importance {
            let created = time::to_micros(&e.created_at);
            self.importance.remove((e.layer.as_str(), e.importance, created, docno))?;
        }
        // A kept set may go on holding a memory that leaves the store (it has
        // no posting left to be found by), not one that stays.
        let mut bump = |index, key: &str| {
            if gone {
                self.key_bumps.removal(index, key);
            } else {
                self.key_bumps.key(index, key);
            }
        };
        if !same.layer {
            self.layer_order.remove((e.layer.as_str(), docno))?;
            bump(key_sets::Index::Layers, &e.layer);
        }
        if !same.scope {
            for sc in scope_keys(&e.scope) {
                self.scopes.remove((sc, docno))?;
                bump(key_sets::Index::Scopes, sc);
            }
        }
        Ok(())
    }

    /// Writes the buffered posting changes out once they reach [`PENDING_MAX`], so
    /// a transaction of millions of entries (bulk load, rebuild) holds a bounded
    /// buffer; [`Writer::flush`] writes the rest.
    /// Buffers the posting of `term` for `docno` (frequency `tf`, memory length
    /// `len`): for an upgrade that gives every memory a new term.
    pub(super) fn add_posting(&mut self, term: &str, docno: u64, tf: u32, len: u32) -> Result<()> {
        self.pending.add(term, docno, tf, len);
        self.bound_pending()
    }

    fn bound_pending(&mut self) -> Result<()> {
        if self.pending.len() >= PENDING_MAX {
            self.apply_pending()?;
        }
        Ok(())
    }

    /// Writes `rows` (by docno, with their owners) to `user_terms`, each owner's
    /// together, leaving out those of owners marked rowless.
    fn write_rows(
        &mut self,
        rows: std::collections::BTreeMap<u64, (String, Vec<u8>)>,
    ) -> Result<()> {
        let mut rows: Vec<(String, u64, Vec<u8>)> =
            rows.into_iter().map(|(d, (owner, row))| (owner, d, row)).collect();
        rows.sort_unstable_by(|a, b| (a.0.as_str(), a.1).cmp(&(b.0.as_str(), b.1)));
        let mut last: Option<(&str, bool)> = None;
        for (owner, d, row) in &rows {
            let keeps = match last {
                Some((o, keeps)) if o == owner => keeps,
                _ => self.keeps_rows(owner)?,
            };
            last = Some((owner, keeps));
            if keeps {
                self.user_terms.insert((owner.as_str(), *d), row.as_slice())?;
            }
        }
        Ok(())
    }

    /// Whether `owner`'s memories get `user_terms` rows (it is not marked
    /// rowless, see [`doc_terms::ROW_CAP`]).
    fn keeps_rows(&self, owner: &str) -> Result<bool> {
        Ok(self.rowless.get(owner)?.is_none())
    }

    /// Writes the buffered posting changes to the blocks, after the tail's
    /// postings (merged first, so the blocks never hold a docno above the tail's).
    /// An owner they take past [`doc_terms::ROW_CAP`] memories loses its
    /// `user_terms` rows.
    fn apply_pending(&mut self) -> Result<()> {
        let mut rows = std::mem::take(&mut self.new_rows);
        if self.tail.len()? > 0 {
            let docs = tail::rows(&self.tail)?;
            for (docno, doc) in &docs {
                if !self.rows_removed.contains(docno)
                    && let std::collections::btree_map::Entry::Vacant(slot) = rows.entry(*docno)
                {
                    slot.insert((doc_terms::tail_owner(doc)?.to_owned(), doc_terms::tail_row(doc)));
                }
            }
            self.pending.add_docs_under(docs);
            self.tail.retain(|_, _| false)?;
            self.tail_writes.merge();
        }
        self.rows_removed.clear();
        self.write_rows(rows)?;
        let grown =
            self.pending.apply(&mut self.postings, tail::new_version(), OWNER_TERM_PREFIX)?;
        for (term, df) in grown {
            if let Some(owner) = term.strip_prefix(OWNER_TERM_PREFIX)
                && df > doc_terms::ROW_CAP
            {
                doc_terms::drop_owner_rows(&mut self.user_terms, &mut self.rowless, owner)?;
            }
        }
        Ok(())
    }

    /// The self-model as of this point in the transaction, for update in place; it
    /// is stored when the transaction is flushed.
    ///
    /// # Errors
    /// Storage errors, or a stored self-model that is not valid JSON.
    pub(crate) fn self_model_mut(&mut self) -> Result<&mut SelfModel> {
        if self.self_model.is_none() {
            let model = match self.meta.get(meta_keys::SELF_MODEL)? {
                Some(v) => decode_self_model(v.value())?,
                None => SelfModel::default(),
            };
            self.self_model = Some(model);
        }
        self.self_model_dirty = true;
        Ok(self.self_model.get_or_insert_with(SelfModel::default))
    }

    /// Replaces the self-model; it is stored when the transaction is flushed.
    pub(crate) fn set_self_model(&mut self, model: SelfModel) {
        self.self_model = Some(model);
        self.self_model_dirty = true;
    }

    /// Writes the [`DocInfo`] of `docno`, keeping the transaction's copy current.
    /// Its bits in the bitmaps follow the record.
    fn put_info(&mut self, docno: u64, info: DocInfo) -> Result<()> {
        self.docs.insert(docno, encode(&info)?.as_slice())?;
        for (table, marks, marked) in &mut self.bitmaps {
            marks.set(table, docno, marked(&info))?;
        }
        self.doc_cache.get_mut().insert(docno, info);
        Ok(())
    }

    /// Writes `docno`'s compact record after only its access metadata changed.
    /// No bitmap reads an access field, so none is read or marked: an access
    /// commit writes the records and the number applied, nothing else (each of
    /// the eleven bitmaps would otherwise be read, a 4 KiB row per memory's
    /// chunk, to find every bit as it was).
    fn put_access(&mut self, docno: u64, info: DocInfo) -> Result<()> {
        debug_assert!(
            self.doc_cache.get_mut().get(&docno).is_none_or(|was| {
                bitmap::BITMAPS.iter().all(|(_, marked)| marked(was) == marked(&info))
            }),
            "an access changed a bitmap's bit"
        );
        self.docs.insert(docno, encode(&info)?.as_slice())?;
        self.doc_cache.get_mut().insert(docno, info);
        Ok(())
    }

    /// Drops what the transaction kept of `docno`'s content.
    fn forget_texts(&mut self, docno: u64) {
        self.texts.remove(&docno);
        self.token_sets.remove(&docno);
    }

    /// The token set `derive` makes of the content at `docno`, derived once per
    /// transaction (observe's novelty check compares each new exchange with the
    /// same recent episodes).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn token_set(
        &mut self,
        docno: u64,
        derive: impl FnOnce(&str) -> std::collections::BTreeSet<String>,
    ) -> Result<Option<TokenSet>> {
        if let Some(set) = self.token_sets.get(&docno) {
            return Ok(Some(set.clone()));
        }
        let Some((_, content)) = self.id_and_content(docno)? else { return Ok(None) };
        let set = TokenSet::new(TokenHashes::from(&derive(&content)));
        self.token_sets.insert(docno, set.clone());
        Ok(Some(set))
    }

    /// Records `set` as the token set [`Writer::token_set`] derives from the content
    /// at `docno`, computed ahead by the caller (a batch derives its new episodes'
    /// sets on the analysis threads).
    pub(crate) fn seed_token_set(&mut self, docno: u64, set: TokenHashes) {
        self.token_sets.insert(docno, TokenSet::new(set));
    }

    /// The id and content of the entry at `docno`, decoded once per transaction
    /// (observe compares the same facts several times).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn id_and_content(&mut self, docno: u64) -> Result<Option<(String, String)>> {
        if let Some(t) = self.texts.get(&docno) {
            return Ok(Some(t.clone()));
        }
        let Some(e) = self.get(docno)? else { return Ok(None) };
        let t = (e.id, e.content);
        self.texts.insert(docno, t.clone());
        Ok(Some(t))
    }

    /// Records this transaction's fact-index changes from here on, for
    /// [`Writer::fact_changes`].
    pub(crate) fn record_fact_changes(&mut self) {
        self.fact_changes.get_or_insert_with(FactChanges::default);
    }

    /// The fact-index changes recorded since [`Writer::record_fact_changes`]; `None`
    /// when they are not recorded.
    pub(crate) fn fact_changes(&self) -> Option<&FactChanges> {
        self.fact_changes.as_ref()
    }

    /// The `window` episodic entries with the highest docnos, highest first, with
    /// their creation times (µs). Read from the layer order once per transaction,
    /// then kept up to date as episodes are added.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn newest_episodes(&mut self, window: usize) -> Result<Vec<(u64, i64)>> {
        if let Some((w, list)) = &self.newest_episodes
            && *w == window
        {
            return Ok(list.clone());
        }
        let mut docnos = Vec::with_capacity(window);
        for row in
            self.layer_order.range((EPISODIC, 0u64)..=(EPISODIC, u64::MAX))?.rev().take(window)
        {
            docnos.push(row?.0.value().1);
        }
        let mut list = Vec::with_capacity(docnos.len());
        for d in docnos {
            if let Some(info) = self.docinfo(d)? {
                list.push((d, info.created_at));
            }
        }
        self.newest_episodes = Some((window, list.clone()));
        Ok(list)
    }

    /// The postings tail at this point of the transaction: memories it holds, and
    /// the cap of writes of fewer than [`tail::BATCH_MIN_NEW`] new memories (which
    /// merge it past that unless a batch left it there: [`tail::Caps::for_write`]).
    ///
    /// # Errors
    /// Storage errors.
    pub fn tail_fill(&self) -> Result<(u64, u64)> {
        Ok((self.tail.len()?, self.tail_caps.single(self.stats.docs)))
    }

    /// Merges the postings tail into the blocks now (with any posting changes
    /// buffered before); returns how many memories the tail held.
    ///
    /// # Errors
    /// Storage errors.
    pub fn merge_tail(&mut self) -> Result<u64> {
        let held = self.tail.len()?;
        if held > 0 || !self.pending.is_empty() {
            self.apply_pending()?;
        }
        Ok(held)
    }

    /// Every docno whose index terms include `term`, ascending, as of this point in
    /// the transaction.
    ///
    /// # Errors
    /// Storage errors.
    pub fn term_docnos(&mut self, term: &str) -> Result<Vec<u64>> {
        if !self.pending.is_empty() || self.tail.len()? > 0 {
            self.apply_pending()?;
        }
        postings::docnos(&self.postings, term)
    }

    /// Names of every entry table (`mem:{layer}:{domain}`) in the store.
    pub fn entry_table_names(&self) -> Result<Vec<String>> {
        Ok(schema::entry_table_names(self.txn.list_tables()?))
    }
}

#[cfg(test)]
mod tests {
    use super::{hex12, new_id};

    #[test]
    fn hex12_is_the_formatted_hex() {
        let mut n: u64 = 0x9e37_79b9_7f4a_7c15;
        for v in [0, 1, 0xf, 0x10, 0xabc_def0_1234, (1 << 48) - 1] {
            assert_eq!(hex12(v), format!("{v:012x}"));
        }
        for _ in 0..1_000 {
            n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let v = n >> 16;
            assert_eq!(hex12(v), format!("{v:012x}"));
        }
    }

    /// A new id that a memory already holds is passed over, and the holder
    /// keeps its docno.
    #[test]
    fn a_new_id_never_takes_one_held() {
        let mem = crate::Memory::open_in_memory().expect("store");
        let mut held = crate::MemoryEntry::new(crate::MemoryType::Semantic, "held");
        held.id = "aaaaaaaaaaaa".into();
        let held = mem.add(held).expect("add");
        let mut made = vec!["bbbbbbbbbbbb", "aaaaaaaaaaaa"];
        let (got, holder, claimed) = mem
            .write(|w| {
                let holder = w.docno_of(&held)?;
                let got = w.claim_new_id(99, || made.pop().unwrap_or_default().to_owned())?;
                let claimed = (w.docno_of(&held)?, w.docno_of(&got)?);
                Ok((got, holder, claimed))
            })
            .expect("write");
        assert_eq!(got, "bbbbbbbbbbbb");
        assert_eq!(claimed, (holder, Some(99)));
        assert!(holder.is_some());
    }

    #[test]
    fn new_ids_are_hex_and_ordered_by_time() {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let ids: Vec<String> = (0..10_000).map(|_| new_id()).collect();
        assert!(ids.iter().all(|id| id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit())));
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids made in turn do not sort in turn");
        // The leading 8 digits are the second the id was made in.
        let lead = |id: &str| u64::from_str_radix(&id[..8], 16).unwrap_or(0);
        assert!(lead(&ids[0]).abs_diff(secs) <= 2, "{} at {secs}", ids[0]);
        assert!(lead(&ids[9_999]).abs_diff(secs) <= 2, "{} at {secs}", ids[9_999]);
    }
}
