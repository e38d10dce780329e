//! The default profile's lookups of the facts near a text, shared by the steps of one
//! observe.
//!
//! One observe asks for the facts of its user and domain near each new fact three
//! times: the pre-filter (similarity 0.5), dedup (0.6) and the contradiction check
//! (0.3), and once more for the raw user text when it may contradict a fact
//! ([`contradiction::may_contradict`]). Each ask is a prefix-filtering probe
//! ([`dedup::probe_tokens`]): a prefix of the text's dedup tokens ranked by how
//! many facts of the partition hold them, the `fact_tokens` rows of those tokens,
//! then the cards of the facts found. The ranking counts no rows ahead: [`rank`]
//! reads the tokens' rows in step until the rarest ones have ended (schema 13;
//! until then the writer kept a count per token in `fact_terms`). [`NearFacts`]
//! ranks each text once, reads each token's rows and each card at most once per
//! observe, and answers every threshold from the same ranking (a lower threshold
//! reads a longer prefix of it).
//!
//! Why the answers stay the same as fresh lookups:
//! - The pre-filter asks before the observe writes any fact, so it gets exactly
//!   what a fresh lookup would.
//! - Later asks may use a ranking made before this observe's own facts changed some
//!   tokens' row counts, or one that left out a token remembered as common.
//!   Prefix filtering holds for any order of the tokens (a fact reaching the
//!   threshold misses at most `a - k` of the `a` tokens, so it holds one of any
//!   `a - k + 1`), so every fact that can reach the threshold is still found;
//!   the others cannot change a dedup decision or a contradiction (see
//!   [`super::contradiction`]'s "What the caller must supply").
//! - Facts this observe stored are excluded by the callers, as before; facts it
//!   superseded are dropped here ([`NearFacts::retire`]), as their cards are.
//!
//! A batch of observes ([`crate::Memory::observe_batch`]) reads most of these
//! lookups ahead, beside the analysis of each exchange, on another thread:
//! [`Prefetch::read`] ranks each text, reads its rows and their cards from a
//! snapshot of the store as the batch's write transaction began. [`NearFacts`]
//! then brings them up to date with what the transaction itself changed
//! ([`FactChanges`]: rows added or removed, cards written or removed, which are
//! read afresh), so it answers exactly as the fresh lookups would. The snapshot's
//! ranking may differ from the current one, which any order allows (above).

use std::sync::Arc;

use foldhash::HashSet;
use redb::{ReadOnlyTable, ReadTransaction, ReadableTable};

use super::{contradiction, dedup};
use crate::error::Result;
use crate::storage::keys::FactCard;
use crate::storage::{FactChanges, Writer, decode, schema};

/// An active fact as the comparisons see it.
pub(super) struct Fact {
    /// Its document number.
    pub docno: u64,
    /// Its id.
    pub id: Arc<str>,
    /// Its content.
    pub content: Arc<str>,
}

/// The reference's `facts()` order of `(importance, created µs, docno)` keys:
/// importance descending, newest first, then insertion order.
pub(super) fn facts_order(a: &(u8, i64, u64), b: &(u8, i64, u64)) -> std::cmp::Ordering {
    b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2))
}

/// A text's dedup tokens as a probe reads them.
#[derive(Debug)]
struct Ranked {
    /// How many dedup tokens the text has.
    tokens: usize,
    /// The rarest of them, fewest facts in the partition first (ties by token), as
    /// many as a probe at the threshold they were ranked for reads.
    rarest: Vec<String>,
}

/// Tokens with their facts' docnos, as [`rank`] read them.
type TokenRows = Vec<(String, Vec<u64>)>;

/// Rows from which [`rank`] remembers a token as common in its partition.
const COMMON_ROWS: usize = 256;

/// Tokens [`COMMON`] remembers at most; past it, it starts afresh.
const COMMON_CAP: usize = 1 << 16;

/// The common tokens [`rank`] found: partition → token → how many facts it last
/// found (or, for a token it stopped reading, at least found) holding it. Only a
/// hint: any order of a text's tokens finds every fact near it (see the module
/// docs), so a stale or foreign count can make a lookup read more rows, never
/// miss one.
#[derive(Default)]
struct Common {
    by_part: foldhash::HashMap<String, foldhash::HashMap<String, usize>>,
    /// Tokens held, over all partitions.
    len: usize,
}

thread_local! {
    /// Each thread's [`Common`].
    static COMMON: std::cell::RefCell<Common> = std::cell::RefCell::new(Common::default());
}

/// Ranks `text`'s dedup tokens by their number of facts in `part` (as `tokens`
/// holds them), as far as a probe at `threshold` reads, and returns the rows
/// (docnos) of each ranked token it read with the ranking. The tokens in `have`
/// are not read again: their rows there give their counts.
///
/// A probe reads all of a text's tokens but the most common ones (at the
/// contradiction check's threshold, all but one). The rows of the tokens are
/// read in step, one row of each at a time: the tokens whose rows end at step
/// `r` hold `r` facts, so once enough of them have ended they are exactly the
/// rarest ones, and the tokens left out were read no further than the longest
/// of those. No count has to be kept up to date by the writer. Tokens found
/// common ([`COMMON_ROWS`] facts or more) are remembered per thread and left out
/// without being read, most common first, when a probe leaves tokens out.
fn rank(
    tokens: &impl ReadableTable<(&'static str, &'static str, u64), ()>,
    part: &str,
    text: &str,
    threshold: f64,
    have: &foldhash::HashMap<String, Vec<u64>>,
) -> Result<(Ranked, TokenRows)> {
    let all = dedup::dedup_tokens(text);
    let want = dedup::probe_len(all.len(), threshold).min(all.len());
    // Each ended token with its count and, when this call read them, its rows.
    let mut ended: Vec<(&String, usize, Option<Vec<u64>>)> = Vec::with_capacity(all.len());
    if want > 0 {
        let mut common: Vec<(usize, &String)> = COMMON.with_borrow(|c| match c.by_part.get(part) {
            Some(counts) => {
                all.iter().filter_map(|t| counts.get(t.as_str()).map(|&n| (n, t))).collect()
            }
            None => Vec::new(),
        });
        common.sort_unstable_by(|a, b| b.cmp(a));
        common.truncate(all.len() - want);
        let mut known: Vec<(usize, &String)> = Vec::new();
        let mut reading = Vec::with_capacity(all.len());
        for token in all.iter().filter(|t| !common.iter().any(|(_, k)| k == t)) {
            match have.get(token) {
                Some(rows) => known.push((rows.len(), token)),
                None => {
                    let (t, end) = ((part, token.as_str(), 0u64), (part, token.as_str(), u64::MAX));
                    reading.push((token, tokens.range(t..=end)?, Vec::new()));
                }
            }
        }
        known.sort_unstable();
        let mut known = known.into_iter().peekable();
        let mut step = 0;
        loop {
            let mut i = 0;
            while i < reading.len() {
                match reading[i].1.next() {
                    Some(row) => {
                        let docno = row?.0.value().2;
                        reading[i].2.push(docno);
                        i += 1;
                    }
                    None => {
                        let (token, _, found) = reading.swap_remove(i);
                        ended.push((token, found.len(), Some(found)));
                    }
                }
            }
            // With nothing left to read, every known token ends now.
            let last = if reading.is_empty() { usize::MAX } else { step };
            while let Some((n, token)) = known.next_if(|(n, _)| *n <= last) {
                ended.push((token, n, None));
            }
            if ended.len() >= want {
                break;
            }
            step += 1;
        }
        // What is now known of each token: the counts of those that ended and of
        // those the caller has, the first rows of those still being read.
        let exact = ended.iter().map(|(t, n, _)| (t.as_str(), *n, true));
        let exact = exact.chain(known.map(|(n, t)| (t.as_str(), n, true)));
        remember(part, exact.chain(reading.iter().map(|(t, _, f)| (t.as_str(), f.len(), false))));
        ended.sort_unstable_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(b.0)));
        ended.truncate(want);
    }
    let rarest = ended.iter().map(|(t, _, _)| (*t).clone()).collect();
    let read = ended.into_iter().filter_map(|(t, _, f)| Some((t.clone(), f?))).collect();
    Ok((Ranked { tokens: all.len(), rarest }, read))
}

/// Notes in [`COMMON`] the tokens of `part` read to `rows` rows that are common,
/// and forgets those that no longer are. `all` tells whether `rows` are all of a
/// token's facts or the first of them (which can only raise its count).
fn remember<'a>(part: &str, read: impl Iterator<Item = (&'a str, usize, bool)>) {
    COMMON.with_borrow_mut(|c| {
        for (token, rows, all) in read {
            if rows >= COMMON_ROWS {
                if c.len >= COMMON_CAP {
                    *c = Common::default();
                }
                match c.by_part.get_mut(part) {
                    Some(counts) => match counts.get_mut(token) {
                        Some(n) => *n = if all { rows } else { rows.max(*n) },
                        None => {
                            counts.insert(token.to_owned(), rows);
                            c.len += 1;
                        }
                    },
                    None => {
                        let counts = [(token.to_owned(), rows)].into_iter().collect();
                        c.by_part.insert(part.to_owned(), counts);
                        c.len += 1;
                    }
                }
            } else if all
                && let Some(counts) = c.by_part.get_mut(part)
                && counts.remove(token).is_some()
            {
                c.len -= 1;
            }
        }
    });
}

/// The facts holding `token` in `part` (as `tokens` holds them), by docno.
fn token_rows(
    tokens: &impl ReadableTable<(&'static str, &'static str, u64), ()>,
    part: &str,
    token: &str,
) -> Result<Vec<u64>> {
    let mut found = Vec::new();
    for row in tokens.range((part, token, 0u64)..=(part, token, u64::MAX))? {
        found.push(row?.0.value().2);
    }
    Ok(found)
}

/// The card of the active fact at `docno` in `part` (as `cards` holds it); `None`
/// when it is not an active fact there.
fn card(
    cards: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    part: &str,
    docno: u64,
) -> Result<Option<FactCard>> {
    match cards.get((part, docno))? {
        Some(v) => Ok(Some(decode(v.value(), "fact card")?)),
        None => Ok(None),
    }
}

/// The lowest threshold an observe asks [`NearFacts::similar`] for (the
/// contradiction check's): [`Prefetch::read`] reads the prefixes it needs, which
/// hold those of every higher threshold.
const LOWEST_THRESHOLD: f64 = contradiction::SIMILARITY_THRESHOLD;

/// The fact-index tables of a read snapshot.
pub(crate) struct SnapshotTables {
    tokens: ReadOnlyTable<(&'static str, &'static str, u64), ()>,
    cards: ReadOnlyTable<(&'static str, u64), &'static [u8]>,
}

impl SnapshotTables {
    /// Opens the tables of `snapshot`.
    ///
    /// # Errors
    /// Storage errors (a table missing from the snapshot included).
    pub(crate) fn open(snapshot: &ReadTransaction) -> Result<Self> {
        Ok(Self {
            tokens: snapshot.open_table(schema::FACT_TOKENS)?,
            cards: snapshot.open_table(schema::FACT_CARDS)?,
        })
    }
}

/// One exchange's near-fact lookups read ahead from a snapshot (see the module
/// docs): what [`NearFacts`] would read first, as the snapshot has it.
#[derive(Debug, Default)]
pub(crate) struct Prefetch {
    /// The partition read.
    part: String,
    /// Each text's dedup tokens ranked by the snapshot's rows.
    ranked: foldhash::HashMap<String, Ranked>,
    /// The snapshot's rows of each token read.
    rows: foldhash::HashMap<String, Vec<u64>>,
    /// The snapshot's card of each docno in those rows (`None`: no card).
    cards: foldhash::HashMap<u64, Option<FactCard>>,
}

impl Prefetch {
    /// Reads, for each of `texts`, what a lookup at the lowest threshold reads, in
    /// the partition of `user` and `domain`.
    ///
    /// # Errors
    /// Storage errors; [`crate::Error::Corrupted`] on an undecodable card.
    pub(crate) fn read<'a>(
        t: &SnapshotTables,
        user: Option<&str>,
        domain: &str,
        texts: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self> {
        let part = schema::fact_partition(user, domain);
        let mut pre = Prefetch { part, ..Prefetch::default() };
        let p = pre.part.as_str();
        for text in texts {
            if pre.ranked.contains_key(text) {
                continue;
            }
            let (ranked, read) = rank(&t.tokens, p, text, LOWEST_THRESHOLD, &pre.rows)?;
            for (token, found) in read {
                for &d in &found {
                    if let std::collections::hash_map::Entry::Vacant(slot) = pre.cards.entry(d) {
                        slot.insert(card(&t.cards, p, d)?);
                    }
                }
                pre.rows.entry(token).or_insert(found);
            }
            pre.ranked.insert(text.to_owned(), ranked);
        }
        Ok(pre)
    }
}

/// The facts of one user and domain near the texts of one observe (see the module
/// docs). Serves one observe: asked after its write transaction, it would answer
/// from rows that may have changed since (a batch drops it later, on another thread).
pub(super) struct NearFacts {
    /// The `(user, domain)` fact partition.
    part: String,
    /// Each text's dedup tokens, rarest first.
    ranked: foldhash::HashMap<String, Ranked>,
    /// Each token's facts in the partition, when first read.
    rows: foldhash::HashMap<String, Vec<u64>>,
    /// Cards read so far; `None` for facts that are not active (or were retired).
    cards: foldhash::HashMap<u64, Option<FactCard>>,
    /// What a batch read ahead for this observe, when it is of this partition.
    pre: Option<Prefetch>,
}

impl NearFacts {
    /// Lookups in the partition of `user` and `domain`, starting from `pre` when it
    /// was read for the same partition.
    pub(super) fn new(user: Option<&str>, domain: &str, pre: Option<Prefetch>) -> Self {
        let part = schema::fact_partition(user, domain);
        let pre = pre.filter(|p| p.part == part);
        // Sized for what was read ahead: most of it moves over as it is asked for.
        let (texts, tokens, cards) =
            pre.as_ref().map_or((0, 0, 0), |p| (p.ranked.len(), p.rows.len(), p.cards.len()));
        Self {
            part,
            ranked: foldhash::HashMap::with_capacity_and_hasher(texts, Default::default()),
            rows: foldhash::HashMap::with_capacity_and_hasher(tokens, Default::default()),
            cards: foldhash::HashMap::with_capacity_and_hasher(cards, Default::default()),
            pre,
        }
    }

    /// The read-ahead lookups with the transaction's changes to bring them up to
    /// date, when both are there. Each lookup moves out of `pre` when it is first
    /// asked for (and is kept in `self` from then on), instead of being copied.
    fn ahead<'p, 'w>(
        pre: &'p mut Option<Prefetch>,
        w: &'w Writer<'_>,
    ) -> Option<(&'p mut Prefetch, &'w FactChanges)> {
        #[cfg(test)]
        if tests::BRUTE_FORCE.get() {
            return None;
        }
        Some((pre.as_mut()?, w.fact_changes()?))
    }

    /// The active facts of the partition whose similarity with `text` can reach
    /// `threshold`, with the facts at `extra`, without those in `exclude`, in the
    /// reference's `facts()` order.
    ///
    /// # Errors
    /// Storage errors.
    pub(super) fn similar(
        &mut self,
        w: &Writer<'_>,
        text: &str,
        threshold: f64,
        extra: impl IntoIterator<Item = u64>,
        exclude: &HashSet<u64>,
    ) -> Result<Vec<Fact>> {
        let reads = |r: &Ranked| dedup::probe_len(r.tokens, threshold).min(r.tokens);
        if self.ranked.get(text).is_none_or(|r| reads(r) > r.rarest.len()) {
            let ahead = Self::ahead(&mut self.pre, w).and_then(|(pre, _)| pre.ranked.remove(text));
            let ranked = match ahead {
                Some(r) if reads(&r) <= r.rarest.len() => r,
                // Not read ahead, or ranked for a higher threshold than this one
                // (which observes never ask for).
                _ => {
                    let at = threshold.min(LOWEST_THRESHOLD);
                    let part = &self.part;
                    let (ranked, read) = rank(&w.fact_tokens, part, text, at, &self.rows)?;
                    // Read in the transaction: as current as any rows kept.
                    for (token, found) in read {
                        self.rows.entry(token).or_insert(found);
                    }
                    ranked
                }
            };
            self.ranked.insert(text.to_owned(), ranked);
        }
        let (ranked, take) = match self.ranked.get(text) {
            Some(r) => (r.rarest.as_slice(), reads(r)),
            None => (&[][..], 0),
        };
        let mut docnos: Vec<u64> = extra.into_iter().collect();
        #[cfg(test)]
        if tests::BRUTE_FORCE.get() {
            // The oracle: every fact of the partition, as a fresh scan.
            let p = self.part.as_str();
            for row in w.fact_cards.range((p, 0u64)..=(p, u64::MAX))? {
                docnos.push(row?.0.value().1);
            }
            self.cards.clear();
        }
        for token in &ranked[..take] {
            if !self.rows.contains_key(token) {
                let (p, t) = (self.part.as_str(), token.as_str());
                let found = match Self::ahead(&mut self.pre, w)
                    .and_then(|(pre, ch)| pre.rows.remove(token).map(|rows| (rows, ch.rows(p, t))))
                {
                    // The snapshot's rows, less those removed since, plus those added.
                    Some((rows, None)) => rows,
                    Some((rows, Some(changed))) => {
                        let mut found: Vec<u64> = rows
                            .iter()
                            .copied()
                            .filter(|d| changed.get(d).is_none_or(|&exists| exists))
                            .collect();
                        found.extend(
                            changed
                                .iter()
                                .filter(|&(d, &exists)| exists && !rows.contains(d))
                                .map(|(&d, _)| d),
                        );
                        found
                    }
                    None => token_rows(&w.fact_tokens, p, t)?,
                };
                self.rows.insert(token.clone(), found);
            }
            docnos.extend(self.rows.get(token).into_iter().flatten().copied());
        }
        docnos.sort_unstable();
        docnos.dedup();
        docnos.retain(|d| !exclude.contains(d));
        for &d in &docnos {
            if !self.cards.contains_key(&d) {
                // A card the snapshot has, unless the transaction changed it since.
                let part = self.part.as_str();
                let ahead = Self::ahead(&mut self.pre, w).and_then(|(pre, ch)| {
                    (!ch.card_changed(part, d)).then(|| pre.cards.remove(&d)).flatten()
                });
                let found = match ahead {
                    Some(found) => found,
                    None => card(&w.fact_cards, part, d)?,
                };
                self.cards.insert(d, found);
            }
        }
        let mut out: Vec<((u8, i64, u64), &FactCard)> = docnos
            .iter()
            .filter_map(|&d| match self.cards.get(&d) {
                Some(Some(card)) => Some(((card.importance, card.created_us, d), card)),
                _ => None,
            })
            .collect();
        // The keys end with the docno: no two are equal.
        out.sort_unstable_by(|a, b| facts_order(&a.0, &b.0));
        Ok(out
            .into_iter()
            .map(|((_, _, docno), card)| Fact {
                docno,
                id: Arc::clone(&card.id),
                content: Arc::clone(&card.content),
            })
            .collect())
    }

    /// The fact at `docno` was superseded by this observe: it is no longer active.
    pub(super) fn retire(&mut self, docno: u64) {
        self.cards.insert(docno, None);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::sync::Arc;

    use proptest::prelude::*;

    use crate::write::dedup;
    use crate::write::observe::{ObserveOptions, ObserveReport};
    use crate::{FixedClock, Memory, Profile, model::time};

    thread_local! {
        /// Makes [`super::NearFacts::similar`] compare with every fact of the
        /// partition, read afresh each time: no prefix filter, no cache.
        pub(super) static BRUTE_FORCE: Cell<bool> = const { Cell::new(false) };
    }

    const SAYINGS: &[&str] = &[
        "I live in Paris",
        "I live in Berlin",
        "I moved to Lisbon",
        "I work at Acme",
        "I work at Globex now",
        "I'm a nurse at Mercy Hospital",
        "I am a teacher at Lincoln High",
        "I like green tea",
        "I don't like green tea",
        "I love green tea with honey",
        "I like black coffee",
        "I hate black coffee",
        "my favorite color is blue",
        "my favorite color is green",
        "I use vim for editing",
        "I use emacs for editing",
        "I'm learning Rust",
        "I'm not learning Rust anymore",
        "I prefer tea over coffee",
        "my name is Ada",
    ];

    /// What an observe run leaves: every fact (content, superseded flag, what
    /// superseded it, by content) and each report's decisions, ids replaced by
    /// contents.
    fn run(steps: &[(usize, usize, usize)], brute: bool) -> Vec<String> {
        BRUTE_FORCE.set(brute);
        let start = time::parse_timestamp("2026-01-01T00:00:00Z").expect("time");
        let clock = Arc::new(FixedClock::new(start));
        let mem = Memory::builder()
            .profile(Profile::Default)
            .clock(clock.clone())
            .open_in_memory()
            .expect("store");
        let mut out = Vec::new();
        for (i, &(a, b, user)) in steps.iter().enumerate() {
            clock.set(start + chrono::Duration::minutes(i as i64 * 7));
            let text = format!("{}. Also, {}", SAYINGS[a], SAYINGS[b]);
            let r = mem.observe_pair(&text, "Noted.", &opts_of(user)).expect("observe");
            out.push(format!("{i}: {}", decisions(&r)));
        }
        out.extend(facts_state(&mem));
        BRUTE_FORCE.set(false);
        out
    }

    /// The user (two of them) and domain (two) of step user number `user`.
    fn opts_of(user: usize) -> ObserveOptions {
        ObserveOptions {
            user_id: Some(format!("u{}", user % 2)),
            domain: if user < 2 { "default".into() } else { "work".into() },
        }
    }

    /// A report's facts, superseded facts (with their cause) and contradictions.
    fn decisions(r: &ObserveReport) -> String {
        let facts: Vec<&str> = r.facts.iter().map(|f| f.content.as_str()).collect();
        let gone: Vec<String> =
            r.superseded.iter().map(|s| format!("{}/{}", s.content, s.cause)).collect();
        let contra: Vec<&str> = r.contradictions.iter().map(|c| c.reason.as_str()).collect();
        format!("{facts:?} {gone:?} {contra:?}")
    }

    /// Every fact of the store: content, user, superseded flag and what superseded
    /// it (by content).
    fn facts_state(mem: &Memory) -> Vec<String> {
        let all = mem.facts(true).expect("facts");
        let content_of = |id: &str| {
            all.iter().find(|e| e.id == id).map_or_else(|| id.to_owned(), |e| e.content.clone())
        };
        all.iter()
            .map(|e| {
                format!(
                    "{} {:?} {} {:?}",
                    e.content,
                    e.user_id,
                    e.superseded,
                    e.superseded_by.as_deref().map(content_of)
                )
            })
            .collect()
    }

    /// `run`'s rendering of a store after `batches` of exchanges, observed either
    /// one at a time or with `observe_batch` (one call per batch), all at one time.
    fn run_batches(batches: &[Vec<(usize, usize, usize)>], batched: bool) -> Vec<String> {
        let start = time::parse_timestamp("2026-01-01T00:00:00Z").expect("time");
        let mem = Memory::builder()
            .profile(Profile::Default)
            .clock(Arc::new(FixedClock::new(start)))
            .open_in_memory()
            .expect("store");
        let mut out = Vec::new();
        for (b, steps) in batches.iter().enumerate() {
            let items: Vec<(String, String, ObserveOptions)> = steps
                .iter()
                .map(|&(a, c, user)| {
                    let text = format!("{}. Also, {}", SAYINGS[a], SAYINGS[c]);
                    (text, "Noted.".to_owned(), opts_of(user))
                })
                .collect();
            let reports = if batched {
                mem.observe_batch(&items).expect("batch")
            } else {
                items.iter().map(|(u, a, o)| mem.observe_pair(u, a, o).expect("observe")).collect()
            };
            for (i, r) in reports.iter().enumerate() {
                out.push(format!("{b}.{i}: {}", decisions(r)));
            }
        }
        out.extend(facts_state(&mem));
        out
    }

    /// Words that are their own dedup tokens.
    const WORDS: &[&str] = &["alpine", "bakery", "canyon", "dolphin", "ember", "falcon", "glacier"];

    /// A `fact_tokens`-shaped table in memory holding `counts[i]` facts of
    /// `WORDS[i]` in partition "p" (and as many in partition "q"), passed to `f`.
    fn with_rows<R>(
        counts: &[usize],
        f: impl FnOnce(&redb::Table<'_, (&'static str, &'static str, u64), ()>) -> R,
    ) -> R {
        let table: redb::TableDefinition<(&str, &str, u64), ()> =
            redb::TableDefinition::new("tokens");
        let db = redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .expect("db");
        let txn = db.begin_write().expect("txn");
        let mut t = txn.open_table(table).expect("table");
        for (i, (word, &n)) in WORDS.iter().zip(counts).enumerate() {
            for k in 0..n {
                t.insert(("p", *word, (k * 7 + i) as u64), ()).expect("row");
                // The same token in another partition is not counted.
                t.insert(("q", *word, k as u64), ()).expect("row");
            }
        }
        f(&t)
    }

    /// Forgets the common tokens this thread's rankings found.
    fn forget_common() {
        super::COMMON.with_borrow_mut(|c| *c = super::Common::default());
    }

    /// A token remembered as common is left out of a probe unread, even where
    /// it is in fact the rarest; the tokens read are ranked by their rows, and
    /// their rows are all there.
    #[test]
    fn a_token_remembered_as_common_is_not_read() {
        forget_common();
        let counts = [3, 5, 8, 300, 0, 0, 0];
        let none = foldhash::HashMap::default();
        with_rows(&counts, |t| {
            let text = "alpine bakery canyon dolphin";
            let (first, read) = super::rank(t, "p", text, 0.3, &none).expect("rank");
            assert_eq!(first.rarest, ["alpine", "bakery", "canyon"]);
            assert_eq!(read.len(), 3);
            super::COMMON.with_borrow_mut(|c| {
                // dolphin was read to one row past canyon's 8 rows: not common.
                assert!(c.by_part.is_empty());
                c.by_part.entry("p".to_owned()).or_default().insert("alpine".to_owned(), 10_000);
            });
            let (second, read) = super::rank(t, "p", text, 0.3, &none).expect("rank");
            assert_eq!(second.rarest, ["bakery", "canyon", "dolphin"]);
            assert_eq!(read[2].1, super::token_rows(t, "p", "dolphin").expect("rows"));
            assert_eq!(read[2].1.len(), 300);
            // dolphin, read in full, is now remembered with its count.
            let dolphin = super::COMMON
                .with_borrow(|c| c.by_part.get("p").and_then(|p| p.get("dolphin")).copied());
            assert_eq!(dolphin, Some(300));
        });
        forget_common();
    }

    /// Tokens whose rows the caller has are not read again: their rows give
    /// their counts, in step with the tokens read, and only the rows read are
    /// returned.
    #[test]
    fn rows_the_caller_has_are_not_read_again() {
        forget_common();
        with_rows(&[3, 5, 8, 300, 0, 0, 0], |t| {
            let text = "alpine bakery canyon dolphin";
            // As the caller has them, alpine is the most common token and canyon
            // ties with bakery (the table holds 3 and 8 rows).
            let have: foldhash::HashMap<String, Vec<u64>> =
                [("alpine".to_owned(), vec![1; 500]), ("canyon".to_owned(), vec![2; 5])]
                    .into_iter()
                    .collect();
            let (ranked, read) = super::rank(t, "p", text, 0.3, &have).expect("rank");
            assert_eq!(ranked.rarest, ["bakery", "canyon", "dolphin"]);
            let read: Vec<(&str, usize)> =
                read.iter().map(|(t, r)| (t.as_str(), r.len())).collect();
            assert_eq!(read, [("bakery", 5), ("dolphin", 300)]);
            // Ranked at a higher threshold (two tokens), canyon, which the caller
            // has, ends in step with bakery.
            let (ranked, read) = super::rank(t, "p", text, 0.6, &have).expect("rank");
            assert_eq!(ranked.rarest, ["bakery", "canyon"]);
            assert_eq!(read.len(), 1);
        });
        forget_common();
    }

    proptest! {
        /// Ranking by reading the tokens' rows in step gives the first tokens of
        /// the order by row count (ties by token), as far as the probe at the
        /// threshold reads, and each one's rows in full; ranked again, with the
        /// common tokens remembered, it still ranks the tokens it reads by their
        /// rows and leaves out only tokens as common as any it reads.
        #[test]
        fn rows_read_in_step_rank_as_counts(
            counts in prop::collection::vec(0..400usize, WORDS.len()),
            picked in prop::collection::vec(any::<bool>(), WORDS.len()),
            threshold in prop::sample::select(vec![0.3, 0.5, 0.6, 0.9]),
            had in prop::collection::vec(any::<bool>(), WORDS.len()),
        ) {
            forget_common();
            let none = foldhash::HashMap::default();
            with_rows(&counts, |t| {
                // With some tokens' rows given, the same ranking, and only the
                // others' rows read.
                let have: foldhash::HashMap<String, Vec<u64>> = WORDS
                    .iter()
                    .zip(&had)
                    .filter(|(_, h)| **h)
                    .map(|(w, _)| ((*w).to_owned(), super::token_rows(t, "p", w).expect("rows")))
                    .collect();
                let text: Vec<&str> =
                    WORDS.iter().zip(&picked).filter(|(_, p)| **p).map(|(w, _)| *w).collect();
                let text = text.join(" ");
                let count = |w: &str| WORDS.iter().position(|x| *x == w).map_or(0, |i| counts[i]);
                let by_counts = dedup::ranked_tokens(&text, |w| count(w) as u64);
                let take = dedup::probe_len(by_counts.len(), threshold);
                let (ranked, read) = super::rank(t, "p", &text, threshold, &none).expect("rank");
                prop_assert_eq!(ranked.tokens, by_counts.len());
                prop_assert_eq!(&ranked.rarest[..], &by_counts[..take]);
                prop_assert_eq!(read.len(), take);
                for (token, rows) in &read {
                    prop_assert_eq!(rows, &super::token_rows(t, "p", token).expect("rows"));
                }
                forget_common();
                let (given, read) = super::rank(t, "p", &text, threshold, &have).expect("rank");
                prop_assert_eq!(&given.rarest, &ranked.rarest);
                let unread: Vec<&String> =
                    ranked.rarest.iter().filter(|w| !have.contains_key(*w)).collect();
                prop_assert_eq!(read.iter().map(|(w, _)| w).collect::<Vec<_>>(), unread);
                let (again, read) = super::rank(t, "p", &text, threshold, &none).expect("rank");
                prop_assert_eq!(again.rarest.len(), take);
                let most = again.rarest.iter().map(|w| count(w)).max().unwrap_or(0);
                for pair in again.rarest.windows(2) {
                    prop_assert!(count(&pair[0]) <= count(&pair[1]), "{:?}", again.rarest);
                }
                for left in by_counts.iter().filter(|w| !again.rarest.contains(w)) {
                    prop_assert!(count(left) >= most, "{} left out of {:?}", left, again.rarest);
                }
                for (token, rows) in &read {
                    prop_assert_eq!(rows, &super::token_rows(t, "p", token).expect("rows"));
                }
                Ok(())
            })?;
            forget_common();
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// A batch's lookups, read ahead from the snapshot its transaction began
        /// from and brought up to date with its own changes, decide exactly as
        /// observing the same exchanges one at a time.
        #[test]
        fn batches_decide_as_single_observes(
            batches in prop::collection::vec(
                prop::collection::vec((0..SAYINGS.len(), 0..SAYINGS.len(), 0..4usize), 1..25),
                1..4,
            )
        ) {
            // A first batch states every saying for every user and domain, so the
            // later batches' snapshots hold facts their own observes supersede.
            let seed: Vec<(usize, usize, usize)> = (0..4)
                .flat_map(|user| (0..SAYINGS.len()).map(move |a| (a, (a + 7) % SAYINGS.len(), user)))
                .collect();
            let mut all = vec![seed];
            all.extend(batches);
            prop_assert_eq!(run_batches(&all, true), run_batches(&all, false));
        }

        /// Shared, prefix-filtered lookups decide exactly as comparing every new
        /// fact with every fact of its user and domain.
        #[test]
        fn lookups_decide_as_brute_force(
            steps in prop::collection::vec((0..SAYINGS.len(), 0..SAYINGS.len(), 0..4usize), 1..40)
        ) {
            prop_assert_eq!(run(&steps, false), run(&steps, true));
        }
    }
}
