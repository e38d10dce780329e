//! Every redb table soulmem keeps, and the one function that names entry tables.
//!
//! `docs/DESIGN.md` describes each table's key and value encoding and the invariants
//! between them. Memory ids (strings) map to dense internal document numbers
//! (`docno`, a `u64` that is never reused); every index refers to docnos.

use redb::TableDefinition;

use crate::error::{Error, Result};

/// Version of the on-disk layout. Bump on any change to a table or record encoding.
pub const SCHEMA_VERSION: u32 = 17;

/// Version byte in front of every postcard record.
pub const RECORD_VERSION: u8 = 1;

/// `key → bytes`: schema version, tokenizer version, profile, counters, corpus
/// statistics, core memory, settings, self-model, ingest progress.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// `memory id → docno`.
pub const IDS: TableDefinition<&str, u64> = TableDefinition::new("ids");

/// `docno → DocInfo`: where the entry lives and the compact fields ranking and
/// filtering read, so recall never decodes whole entries.
pub const DOCS: TableDefinition<u64, &[u8]> = TableDefinition::new("docs");

/// `(term, first docno) → block`: the inverted index over every entry's content
/// and context (reference tokens of 3+ letters, Snowball-stemmed), as compressed
/// blocks of postings (docno, weighted term frequency, memory length) with their
/// score upper bounds, and after them each term's info row (`(term, u64::MAX)`:
/// document frequency and impacts); `storage::postings` has the encoding. (Schema 3;
/// schema 2 kept one row per posting and a separate `terms` table.)
pub const POSTINGS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("posting_blocks");

/// `docno → TailDoc`: the postings of the newest memories (by default at most
/// `storage::tail::default_cap` of the store's size), not yet merged into
/// [`POSTINGS`]; every docno
/// here is above every docno there (schema 4).
pub const POSTING_TAIL: TableDefinition<u64, &[u8]> = TableDefinition::new("posting_tail");

/// `docno → context text`: the conversation context a memory was written in (the
/// preceding turns), indexed with it at half weight.
pub const CONTEXT: TableDefinition<u64, &str> = TableDefinition::new("context");

/// `(partition, dedup token, docno) → ()` over active semantic facts (dedup
/// tokenizer, minimum 2 letters minus stop-words): dedup and similarity candidates.
/// The partition is `user_id ␟ domain` ([`fact_partition`]), so a lookup reads only
/// the facts of one user and domain.
pub const FACT_TOKENS: TableDefinition<(&str, &str, u64), ()> = TableDefinition::new("fact_tokens");

/// `(partition, dedup token) → number of active facts of the partition containing
/// it`, until schema 13 (whose near-fact lookups rank a text's tokens by reading
/// their [`FACT_TOKENS`] rows in step): dropped by the upgrade to schema 13.
pub const FACT_TERMS: TableDefinition<(&str, &str), u64> = TableDefinition::new("fact_terms");

/// `(partition, docno) → record` ([`super::keys::FactCard`]): each active semantic
/// fact's id, content, importance and creation time, clustered by [`fact_partition`].
/// Dedup and contradiction checks read their candidates here: the facts of one user
/// and domain sit on a few neighbouring pages, where their entries and `docs`
/// records are scattered over the whole store.
pub const FACT_CARDS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("fact_cards");

/// The partition key of a fact's owner and domain in [`FACT_TOKENS`].
#[must_use]
pub fn fact_partition(user_id: Option<&str>, domain: &str) -> String {
    fact_partition_parts(user_id, domain).concat()
}

/// The pieces [`fact_partition`] joins, for keys that embed it.
#[must_use]
pub fn fact_partition_parts<'a>(user_id: Option<&'a str>, domain: &'a str) -> [&'a str; 3] {
    [user_id.unwrap_or(""), "\u{1f}", domain]
}

/// `(slot key, user_id or "", domain, docno) → ()` over active semantic facts: prefix
/// conflict lookup.
pub const PREFIXES: TableDefinition<(&str, &str, &str, u64), ()> =
    TableDefinition::new("fact_prefixes");

/// `(attribute, user_id or "", domain, docno) → ()` over active semantic facts that
/// state a verb attribute (location, employer, role): contradiction lookup.
pub const ATTRIBUTES: TableDefinition<(&str, &str, &str, u64), ()> =
    TableDefinition::new("fact_attributes");

/// `(entity lower-cased, docno) → ()`.
pub const ENTITIES: TableDefinition<(&str, u64), ()> = TableDefinition::new("entities");

/// `(user_id or "", docno) → ()` for every entry, until schema 8 (whose owner
/// terms and `user_terms` rows hold the same): read by the upgrade to schema 7,
/// dropped by the upgrade to schema 8.
pub const USERS: TableDefinition<(&str, u64), ()> = TableDefinition::new("users");

/// `(user_id or "", docno) → the memory's index terms` for every entry of an
/// owner not in [`ROWLESS`], except those in [`POSTING_TAIL`] (schema 12: their
/// rows are written when the tail merges): each term with its weighted frequency, and the
/// memory's length, as its postings hold them (`storage::doc_terms` has the
/// encoding). A `user_id`-filtered recall of an owner with few memories scores
/// them from these neighbouring rows (schema 7).
pub const USER_TERMS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("user_terms");

/// `user_id or "" → ()` for every owner whose `user_terms` rows were dropped
/// when it grew past `storage::doc_terms::ROW_CAP` memories (schema 11): far
/// too many to be scored from rows, so a recall filtered by it searches the
/// postings. Its memories get no rows while it is marked; `reindex` decides
/// afresh.
pub const ROWLESS: TableDefinition<&str, ()> = TableDefinition::new("rowless_owners");

/// `docno / 32768 → bitmap` of the superseded memories (schema 9): one bit per
/// docno, a row only where one is set (`storage::bitmap`). Recall skips them
/// on their bit instead of reading their `docs` records.
pub const SUPERSEDED: TableDefinition<u64, &[u8]> = TableDefinition::new("superseded");

/// `docno / 32768 → bitmap` of the withheld memories (schema 15): core memories
/// and archived episodes, which no recall returns ([`crate::storage::DocInfo::withheld`]),
/// laid out as [`SUPERSEDED`]. Recall skips them on their bit.
pub const WITHHELD: TableDefinition<u64, &[u8]> = TableDefinition::new("withheld");

/// `docno / 32768 → bitmap` of the restricted memories (schema 15): those not
/// public (bonded or private, [`crate::storage::DocInfo::restricted`]), laid
/// out as [`SUPERSEDED`]. A recall by a requester who may see none of them
/// skips them on their bit.
pub const RESTRICTED: TableDefinition<u64, &[u8]> = TableDefinition::new("restricted");

/// `docno / 32768 → bitmap` of the episodic layer's memories (schema 16),
/// laid out as [`SUPERSEDED`]. A `layer` or `types` filter keeping only the
/// episodic and semantic layers, when they hold too much of the store to walk
/// their members, skips the other memories on these bits.
pub const EPISODIC_LAYER: TableDefinition<u64, &[u8]> = TableDefinition::new("episodic_layer");

/// `docno / 32768 → bitmap` of the semantic layer's memories (schema 16), as
/// [`EPISODIC_LAYER`].
pub const SEMANTIC_LAYER: TableDefinition<u64, &[u8]> = TableDefinition::new("semantic_layer");

/// The least importance with a bitmap in [`IMPORTANT`].
pub const IMPORTANT_FROM: u8 = 6;

/// `docno / 32768 → bitmap` of the memories of importance at least 6, 7, 8, 9
/// and 10 (schema 16), one table each, laid out as [`SUPERSEDED`]. A
/// `min_importance` filter of 6 or more walks its bitmap's set bits beside
/// the postings (few memories are that important) instead of checking the
/// records of the memories that would place.
pub const IMPORTANT: [TableDefinition<u64, &[u8]>; 5] = [
    TableDefinition::new("importance_6_up"),
    TableDefinition::new("importance_7_up"),
    TableDefinition::new("importance_8_up"),
    TableDefinition::new("importance_9_up"),
    TableDefinition::new("importance_10_up"),
];

/// `docno / 32768 → bitmap` of the memories without a scope (schema 17), laid
/// out as [`SUPERSEDED`]: every `scopes` filter keeps them. A filter that keeps
/// few memories walks their set bits beside its scopes' rows in [`SCOPES`].
pub const UNSCOPED: TableDefinition<u64, &[u8]> = TableDefinition::new("unscoped");

/// `(scope, docno) → ()`: every scope of a memory (schema 17), once per memory.
/// A `scopes` filter that keeps few memories walks the rows of the scopes it
/// admits (and the [`UNSCOPED`] memories) beside the postings, instead of
/// checking the records of the memories that would place.
pub const SCOPES: TableDefinition<(&str, u64), ()> = TableDefinition::new("scopes");

/// `(layer, importance, created_at µs, docno) → ()`: eviction order.
pub const IMPORTANCE: TableDefinition<(&str, u8, i64, u64), ()> =
    TableDefinition::new("importance");

/// `(layer, docno) → ()`: every entry of a layer in insertion order, across domains.
pub const LAYER_ORDER: TableDefinition<(&str, u64), ()> = TableDefinition::new("layer_order");

/// `name → (insertion seq, entity type)`: knowledge-graph nodes.
pub const GRAPH_NODES: TableDefinition<&str, &[u8]> = TableDefinition::new("graph_nodes");

/// `edge seq → edge record`: knowledge-graph edges in insertion order.
pub const GRAPH_EDGES: TableDefinition<u64, &[u8]> = TableDefinition::new("graph_edges");

/// `(node lower-cased, edge seq) → ()`: adjacency for graph expansion.
pub const GRAPH_ADJ: TableDefinition<(&str, u64), ()> = TableDefinition::new("graph_adj");

/// `(source, target, relation, edge seq) → ()` for every active edge (schema 14),
/// names as written: whether an identical active edge exists is a point lookup,
/// not a read of every edge of the source.
pub const GRAPH_ACTIVE: TableDefinition<(&str, &str, &str, u64), ()> =
    TableDefinition::new("graph_active");

/// `id → general event record`.
pub const EVENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("general_events");

/// `seq → conversation archive record` (versioned postcard `ConversationArchive`).
pub const ARCHIVES: TableDefinition<u64, &[u8]> = TableDefinition::new("archives");

/// `docno → vector`: the embedding of an entry's content (little-endian `f32`s,
/// L2-normalised), for stores built with an embedder. Optional: a store written
/// without one may lack the table, and every row belongs to an existing docno.
pub const EMBEDDINGS: TableDefinition<u64, &[u8]> = TableDefinition::new("embeddings");

/// `seq → JSON record` of every deletion.
pub const DELETION_AUDIT: TableDefinition<u64, &[u8]> = TableDefinition::new("audit_deletion");

/// `seq → JSON record` of every supersede.
pub const SUPERSEDE_AUDIT: TableDefinition<u64, &[u8]> = TableDefinition::new("audit_supersede");

/// Prefix of every entry table name: `mem:{layer}:{domain}`.
pub const ENTRY_TABLE_PREFIX: &str = "mem:";

/// The longest layer or domain name.
pub const MAX_NAME_LEN: usize = 64;

/// Checks a layer or domain name: 1 to 64 characters of ASCII letters, digits, `_`,
/// `-` or `.`.
///
/// # Errors
/// [`Error::InvalidName`] saying what is wrong.
pub fn validate_name(what: &'static str, name: &str) -> Result<()> {
    let bad = |reason| Err(Error::InvalidName { what, name: name.to_owned(), reason });
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return bad("it is longer than 64 bytes");
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
        return bad("only ASCII letters, digits, '_', '-' and '.' are allowed");
    }
    Ok(())
}

/// The name of the table holding the entries of `(layer, domain)`.
///
/// # Errors
/// [`Error::InvalidName`] for a bad layer or domain.
pub fn entry_table_name(layer: &str, domain: &str) -> Result<String> {
    validate_name("layer", layer)?;
    validate_name("domain", domain)?;
    Ok([ENTRY_TABLE_PREFIX, layer, ":", domain].concat())
}

/// Names of the entry tables among `tables` (those [`parse_entry_table_name`]
/// reads).
pub(crate) fn entry_table_names(
    tables: impl Iterator<Item = redb::UntypedTableHandle>,
) -> Vec<String> {
    use redb::TableHandle;
    tables.map(|h| h.name().to_owned()).filter(|n| parse_entry_table_name(n).is_some()).collect()
}

/// Splits an entry table name back into `(layer, domain)`.
#[must_use]
pub fn parse_entry_table_name(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix(ENTRY_TABLE_PREFIX)?.split_once(':')
}

/// The definition of an entry table: `docno → versioned postcard MemoryEntry`.
pub fn entry_table(name: &str) -> TableDefinition<'_, u64, &'static [u8]> {
    TableDefinition::new(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_in_one_place() {
        assert_eq!(entry_table_name("semantic", "work").ok().as_deref(), Some("mem:semantic:work"));
        assert!(entry_table_name("", "x").is_err());
        assert!(entry_table_name("a:b", "x").is_err());
        assert!(entry_table_name("journal", "../etc").is_err());
        assert!(entry_table_name(&"x".repeat(65), "d").is_err());
        assert_eq!(parse_entry_table_name("mem:recipes:home"), Some(("recipes", "home")));
    }
}
