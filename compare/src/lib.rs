//! Baselines for `soulctl bench scale --compare`: the same documents indexed by
//! tantivy (BM25) and by SQLite FTS5 (`bm25()`), each answering a top-k disjunctive
//! query over the same terms soulmem searches for.
//!
//! Both index soulmem's own index terms of each memory (stop words dropped,
//! stemmed; split on whitespace) rather than analysing the text themselves, so
//! every engine has the same postings and document lengths, and a query term
//! matches the same memories in all three. Both keep their reader open between
//! queries (tantivy's `Searcher`, one SQLite connection with a cached prepared
//! statement), and both load the stored text of their hits, as soulmem's recall
//! returns whole memories.
#![deny(missing_docs)]

use std::path::Path;

use rusqlite::Connection;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, STORED, Schema, TextFieldIndexing, TextOptions, Value,
};
use tantivy::tokenizer::{TextAnalyzer, WhitespaceTokenizer};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term, doc};

/// Errors of either engine, as text.
pub type Result<T> = std::result::Result<T, String>;

/// A tantivy index of pre-analysed terms, with the text stored beside them.
pub struct Tantivy {
    reader: IndexReader,
    terms: Field,
    content: Field,
}

impl Tantivy {
    /// Indexes `docs` (`(terms, text)`: whitespace-separated index terms and the
    /// text to store) into a new index in `dir` (which must be empty or missing),
    /// committing once, and opens a reader.
    ///
    /// # Errors
    /// Any tantivy error.
    pub fn build<'a>(
        dir: &Path,
        docs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let mut sb = Schema::builder();
        let indexing = TextFieldIndexing::default()
            .set_tokenizer("terms")
            .set_index_option(IndexRecordOption::WithFreqs);
        let terms =
            sb.add_text_field("terms", TextOptions::default().set_indexing_options(indexing));
        let content = sb.add_text_field("content", STORED);
        let index = Index::create_in_dir(dir, sb.build()).map_err(|e| e.to_string())?;
        index
            .tokenizers()
            .register("terms", TextAnalyzer::builder(WhitespaceTokenizer::default()).build());
        {
            let mut w: IndexWriter = index.writer(256_000_000).map_err(|e| e.to_string())?;
            for (t, c) in docs {
                w.add_document(doc!(terms => t, content => c)).map_err(|e| e.to_string())?;
            }
            w.commit().map_err(|e| e.to_string())?;
            w.wait_merging_threads().map_err(|e| e.to_string())?;
        }
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e: tantivy::TantivyError| e.to_string())?;
        Ok(Self { reader, terms, content })
    }

    /// The top `k` documents for the disjunction of `terms` (BM25), with their text.
    ///
    /// # Errors
    /// Any tantivy error.
    pub fn search(&self, terms: &[String], k: usize) -> Result<Vec<(f32, String)>> {
        let clauses: Vec<(Occur, Box<dyn Query>)> = terms
            .iter()
            .map(|t| {
                let q = TermQuery::new(
                    Term::from_field_text(self.terms, t),
                    IndexRecordOption::WithFreqs,
                );
                (Occur::Should, Box::new(q) as Box<dyn Query>)
            })
            .collect();
        let q = BooleanQuery::new(clauses);
        let searcher = self.reader.searcher();
        let top = searcher
            .search(&q, &TopDocs::with_limit(k).order_by_score())
            .map_err(|e| e.to_string())?;
        let mut out = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let d: TantivyDocument = searcher.doc(addr).map_err(|e| e.to_string())?;
            let s = d.get_first(self.content).and_then(|v| v.as_str()).unwrap_or_default();
            out.push((score, s.to_owned()));
        }
        Ok(out)
    }
}

/// An SQLite database with one FTS5 table: the index terms, and the text unindexed.
pub struct Sqlite {
    conn: Connection,
}

impl Sqlite {
    /// Indexes `docs` (`(terms, text)` as for [`Tantivy::build`]) into a new FTS5
    /// table in the database file `path`, in one transaction.
    ///
    /// # Errors
    /// Any SQLite error.
    pub fn build<'a>(
        path: &Path,
        docs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self> {
        let mut conn = Connection::open(path).map_err(|e| e.to_string())?;
        conn.execute_batch(
            "DROP TABLE IF EXISTS mem;
             CREATE VIRTUAL TABLE mem USING fts5(terms, content UNINDEXED);",
        )
        .map_err(|e| e.to_string())?;
        {
            let tx = conn.transaction().map_err(|e| e.to_string())?;
            {
                let mut st = tx
                    .prepare("INSERT INTO mem(terms, content) VALUES (?1, ?2)")
                    .map_err(|e| e.to_string())?;
                for (t, c) in docs {
                    st.execute([t, c]).map_err(|e| e.to_string())?;
                }
            }
            tx.commit().map_err(|e| e.to_string())?;
        }
        conn.execute_batch("INSERT INTO mem(mem) VALUES('optimize');")
            .map_err(|e| e.to_string())?;
        Ok(Self { conn })
    }

    /// The top `k` rows by `bm25()` for the disjunction of `terms`, with their text.
    ///
    /// # Errors
    /// Any SQLite error.
    pub fn search(&self, terms: &[String], k: usize) -> Result<Vec<(f64, String)>> {
        let m: Vec<String> = terms
            .iter()
            .filter(|t| !t.is_empty())
            .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
            .collect();
        if m.is_empty() {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT bm25(mem), content FROM mem WHERE mem MATCH ?1 ORDER BY bm25(mem) LIMIT ?2",
            )
            .map_err(|e| e.to_string())?;
        let rows = st
            .query_map(rusqlite::params![m.join(" OR "), k as i64], |r| {
                Ok((r.get::<_, f64>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| e.to_string())?;
        rows.collect::<std::result::Result<Vec<_>, _>>().map_err(|e| e.to_string())
    }
}
