//! The knowledge graph's data: typed entities and temporal edges.
//!
//! JSON follows the reference's `KnowledgeGraph.to_dict()`: an edge carries
//! `valid_to` and `metadata` only when they are set. Binary encoders (postcard) get a
//! fixed shape instead: every field present, `metadata` as JSON text.

use indexmap::IndexMap;
use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::time::{self, Timestamp, format_timestamp};

fn now() -> Timestamp {
    chrono::Utc::now().naive_utc()
}

/// A directed relationship that is valid from `valid_from` until `valid_to`
/// (open-ended while `valid_to` is `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    /// The source entity.
    pub source: String,
    /// The target entity.
    pub target: String,
    /// The relation, e.g. `works_at`.
    pub relation: String,
    /// Start of validity.
    pub valid_from: Timestamp,
    /// End of validity; `None` = active.
    pub valid_to: Option<Timestamp>,
    /// Free-form metadata (any JSON value; `None` when unset).
    pub metadata: Option<serde_json::Value>,
}

impl Edge {
    /// True while the edge has no end of validity.
    #[must_use]
    pub fn is_active(&self) -> bool {
        self.valid_to.is_none()
    }
}

/// The JSON shape of an edge, as read (`valid_from` may be missing).
#[derive(Deserialize)]
struct JsonEdge {
    source: String,
    target: String,
    relation: String,
    #[serde(default, with = "time::ts_opt")]
    valid_from: Option<Timestamp>,
    #[serde(default, with = "time::ts_opt")]
    valid_to: Option<Timestamp>,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
}

/// The binary shape of an edge.
#[derive(Deserialize)]
struct BinEdge {
    source: String,
    target: String,
    relation: String,
    #[serde(with = "time::ts")]
    valid_from: Timestamp,
    #[serde(with = "time::ts_opt")]
    valid_to: Option<Timestamp>,
    metadata: Option<String>,
}

impl Serialize for Edge {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            let n = 4 + usize::from(self.valid_to.is_some()) + usize::from(self.metadata.is_some());
            let mut m = s.serialize_map(Some(n))?;
            m.serialize_entry("source", &self.source)?;
            m.serialize_entry("target", &self.target)?;
            m.serialize_entry("relation", &self.relation)?;
            m.serialize_entry("valid_from", &format_timestamp(&self.valid_from))?;
            if let Some(t) = &self.valid_to {
                m.serialize_entry("valid_to", &format_timestamp(t))?;
            }
            if let Some(v) = &self.metadata {
                m.serialize_entry("metadata", v)?;
            }
            m.end()
        } else {
            #[derive(Serialize)]
            struct W<'a>(#[serde(with = "time::ts")] &'a Timestamp);
            let meta = match &self.metadata {
                Some(v) => Some(serde_json::to_string(v).map_err(serde::ser::Error::custom)?),
                None => None,
            };
            let mut st = s.serialize_struct("Edge", 6)?;
            st.serialize_field("source", &self.source)?;
            st.serialize_field("target", &self.target)?;
            st.serialize_field("relation", &self.relation)?;
            st.serialize_field("valid_from", &W(&self.valid_from))?;
            st.serialize_field("valid_to", &self.valid_to.as_ref().map(W))?;
            st.serialize_field("metadata", &meta)?;
            st.end()
        }
    }
}

impl<'de> Deserialize<'de> for Edge {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let e = JsonEdge::deserialize(d)?;
            Ok(Edge {
                source: e.source,
                target: e.target,
                relation: e.relation,
                valid_from: e.valid_from.unwrap_or_else(now),
                valid_to: e.valid_to,
                metadata: e.metadata.filter(|v| !v.is_null()),
            })
        } else {
            let e = BinEdge::deserialize(d)?;
            let metadata = match e.metadata {
                Some(text) => Some(serde_json::from_str(&text).map_err(serde::de::Error::custom)?),
                None => None,
            };
            Ok(Edge {
                source: e.source,
                target: e.target,
                relation: e.relation,
                valid_from: e.valid_from,
                valid_to: e.valid_to,
                metadata,
            })
        }
    }
}

/// Entities (name → type, insertion order kept) and temporal edges (order and
/// duplicates kept).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KnowledgeGraph {
    /// Entity name → entity type (`person`, `technology`, `unknown`, …).
    pub entities: IndexMap<String, String>,
    /// Edges in insertion order.
    pub edges: Vec<Edge>,
}

impl KnowledgeGraph {
    /// Adds an edge the way the reference's `add_relationship` does: unknown
    /// endpoints become `"unknown"` entities, and the edge is skipped when an active
    /// edge with the same source, target and relation exists.
    pub fn add_relationship(&mut self, edge: Edge) {
        self.ensure_entity(&edge.source);
        self.ensure_entity(&edge.target);
        let dup = self.edges.iter().any(|e| {
            e.source == edge.source
                && e.target == edge.target
                && e.relation == edge.relation
                && e.is_active()
        });
        if !dup {
            self.edges.push(edge);
        }
    }

    fn ensure_entity(&mut self, name: &str) {
        if !self.entities.contains_key(name) {
            self.entities.insert(name.to_owned(), "unknown".to_owned());
        }
    }
}

#[derive(Serialize)]
struct GraphOut<'a> {
    entities: &'a IndexMap<String, String>,
    edges: &'a [Edge],
}

impl Serialize for KnowledgeGraph {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        GraphOut { entities: &self.entities, edges: &self.edges }.serialize(s)
    }
}

#[derive(Deserialize)]
struct JsonGraph {
    #[serde(default)]
    entities: IndexMap<String, String>,
    #[serde(default)]
    edges: Vec<JsonEdge>,
}

#[derive(Deserialize)]
struct BinGraph {
    entities: IndexMap<String, String>,
    edges: Vec<Edge>,
}

impl<'de> Deserialize<'de> for KnowledgeGraph {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if !d.is_human_readable() {
            let g = BinGraph::deserialize(d)?;
            return Ok(KnowledgeGraph { entities: g.entities, edges: g.edges });
        }
        // The reference's loader: edges with `valid_from` are kept as they are
        // (duplicates included); edges without one go through `add_relationship`.
        let raw = JsonGraph::deserialize(d)?;
        let mut g = KnowledgeGraph { entities: raw.entities, edges: Vec::new() };
        for e in raw.edges {
            let metadata = e.metadata.filter(|v| !v.is_null());
            match e.valid_from {
                Some(valid_from) => {
                    g.ensure_entity(&e.source);
                    g.ensure_entity(&e.target);
                    g.edges.push(Edge {
                        source: e.source,
                        target: e.target,
                        relation: e.relation,
                        valid_from,
                        valid_to: e.valid_to,
                        metadata,
                    });
                }
                None => g.add_relationship(Edge {
                    source: e.source,
                    target: e.target,
                    relation: e.relation,
                    valid_from: now(),
                    valid_to: None,
                    metadata: None,
                }),
            }
        }
        Ok(g)
    }
}
