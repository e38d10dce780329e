//! The knowledge graph's tables: nodes in insertion order, temporal edges, an
//! adjacency index by lower-cased node name, and the active edges by identity.

use redb::{ReadableTable, Table};
use serde::{Deserialize, Serialize};

use super::codec::{decode, encode};
use super::schema::{GRAPH_EDGES, GRAPH_NODES};
use super::{Reader, Writer};
use crate::error::Result;

/// A stored node: its insertion sequence and entity type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// Insertion order.
    pub seq: u64,
    /// Entity type (`person`, `technology`, `unknown`, …).
    pub kind: String,
}

/// A stored edge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EdgeRecord {
    /// Source node name.
    pub source: String,
    /// Target node name.
    pub target: String,
    /// Relation label.
    pub relation: String,
    /// Valid from, µs since the epoch.
    pub valid_from: i64,
    /// Valid until (expired when set), µs since the epoch.
    pub valid_to: Option<i64>,
    /// Metadata as JSON text.
    pub metadata: Option<String>,
}

impl EdgeRecord {
    /// True when the edge has not been expired.
    #[must_use]
    pub fn is_active(&self) -> bool {
        self.valid_to.is_none()
    }

    /// Its rows in the adjacency index as edge `seq`: both ends, lower-cased (a
    /// self-loop's twice).
    pub(crate) fn adj_keys(&self, seq: u64) -> [(String, u64); 2] {
        [(self.source.to_lowercase(), seq), (self.target.to_lowercase(), seq)]
    }

    /// Its row in the identity index of active edges as edge `seq`, when active.
    pub(crate) fn active_key(&self, seq: u64) -> Option<(&str, &str, &str, u64)> {
        self.is_active().then_some((&self.source, &self.target, &self.relation, seq))
    }
}

type Str = &'static str;

/// The sequences of the edges touching the node `node_lower` (lower-cased), in
/// insertion order.
pub(crate) fn adj_rows(
    t: &impl ReadableTable<(Str, u64), ()>,
    node_lower: &str,
) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for row in t.range((node_lower, 0u64)..=(node_lower, u64::MAX))? {
        out.push(row?.0.value().1);
    }
    Ok(out)
}

fn edges_by_seq(
    t: &impl ReadableTable<u64, &'static [u8]>,
    seqs: &[u64],
) -> Result<Vec<(u64, EdgeRecord)>> {
    let mut out = Vec::new();
    for &s in seqs {
        if let Some(v) = t.get(s)? {
            out.push((s, decode(v.value(), "graph edge")?));
        }
    }
    Ok(out)
}

/// Writes the index rows of edge `seq` ([`EdgeRecord::adj_keys`] into `adj`,
/// [`EdgeRecord::active_key`] into `active`).
pub(crate) fn index_edge(
    adj: &mut Table<'_, (Str, u64), ()>,
    active: &mut Table<'_, (Str, Str, Str, u64), ()>,
    seq: u64,
    edge: &EdgeRecord,
) -> Result<()> {
    for (node, seq) in edge.adj_keys(seq) {
        adj.insert((node.as_str(), seq), ())?;
    }
    if let Some(key) = edge.active_key(seq) {
        active.insert(key, ())?;
    }
    Ok(())
}

/// The graph's tables inside one write transaction ([`Writer::graph`]).
pub(crate) struct GraphTables<'t> {
    /// Node name → [`NodeRecord`].
    pub(crate) nodes: Table<'t, Str, &'static [u8]>,
    /// Edge sequence → [`EdgeRecord`].
    pub(crate) edges: Table<'t, u64, &'static [u8]>,
    /// (lower-cased node name, edge sequence) for both ends of every edge.
    pub(crate) adj: Table<'t, (Str, u64), ()>,
    /// (source, target, relation, edge sequence) for every active edge.
    pub(crate) active: Table<'t, (Str, Str, Str, u64), ()>,
}

impl GraphTables<'_> {
    /// Whether an active edge with exactly this source, target and relation is
    /// stored: one range read of the identity index, whatever the degree of
    /// either end.
    fn has_active(&self, edge: &EdgeRecord) -> Result<bool> {
        let (s, t, r) = (edge.source.as_str(), edge.target.as_str(), edge.relation.as_str());
        Ok(self.active.range((s, t, r, 0u64)..=(s, t, r, u64::MAX))?.next().is_some())
    }

    /// Removes an edge and its index rows.
    pub(crate) fn remove_edge(&mut self, seq: u64, edge: &EdgeRecord) -> Result<()> {
        self.edges.remove(seq)?;
        for (node, seq) in edge.adj_keys(seq) {
            self.adj.remove((node.as_str(), seq))?;
        }
        if let Some(key) = edge.active_key(seq) {
            self.active.remove(key)?;
        }
        Ok(())
    }
}

impl Writer<'_> {
    /// Adds a node or changes its type (its position stays).
    pub fn graph_add_entity(&mut self, name: &str, kind: &str) -> Result<()> {
        let existing = match self.graph()?.nodes.get(name)? {
            Some(v) => Some(decode::<NodeRecord>(v.value(), "graph node")?.seq),
            None => None,
        };
        let seq = match existing {
            Some(s) => s,
            None => self.next_seq(),
        };
        let record = encode(&NodeRecord { seq, kind: kind.to_owned() })?;
        self.graph()?.nodes.insert(name, record.as_slice())?;
        Ok(())
    }

    /// Adds an edge unless an identical active one exists (missing endpoints become
    /// `unknown` nodes). Returns whether it was added.
    pub fn graph_add_relationship(&mut self, edge: EdgeRecord) -> Result<bool> {
        for name in [&edge.source, &edge.target] {
            let exists = self.graph()?.nodes.get(name.as_str())?.is_some();
            if !exists {
                self.graph_add_entity(name, "unknown")?;
            }
        }
        if self.graph()?.has_active(&edge)? {
            return Ok(false);
        }
        self.graph_push_edge(&edge)?;
        Ok(true)
    }

    /// Appends an edge as is (duplicates allowed: restores keep them).
    pub fn graph_push_edge(&mut self, edge: &EdgeRecord) -> Result<u64> {
        let seq = self.next_seq();
        let record = encode(edge)?;
        let g = self.graph()?;
        g.edges.insert(seq, record.as_slice())?;
        index_edge(&mut g.adj, &mut g.active, seq, edge)?;
        Ok(seq)
    }
}

impl Reader {
    /// Every node, in insertion order.
    pub fn graph_nodes(&self) -> Result<Vec<(String, String)>> {
        let t = self.txn().open_table(GRAPH_NODES)?;
        let mut v: Vec<(u64, String, String)> = Vec::new();
        for row in t.range::<&str>(..)? {
            let (k, val) = row?;
            let n: NodeRecord = decode(val.value(), "graph node")?;
            v.push((n.seq, k.value().to_owned(), n.kind));
        }
        v.sort_by_key(|x| x.0);
        Ok(v.into_iter().map(|(_, a, b)| (a, b)).collect())
    }

    /// Every edge, in insertion order.
    pub fn graph_edges(&self) -> Result<Vec<EdgeRecord>> {
        let t = self.txn().open_table(GRAPH_EDGES)?;
        let mut out = Vec::new();
        for row in t.range::<u64>(..)? {
            out.push(decode(row?.1.value(), "graph edge")?);
        }
        Ok(out)
    }

    /// Edges touching the node (matched lower-cased), in insertion order.
    pub fn graph_edges_of(&self, node: &str) -> Result<Vec<EdgeRecord>> {
        let seqs = adj_rows(self.graph_adj()?, &node.to_lowercase())?;
        Ok(edges_by_seq(&self.txn().open_table(GRAPH_EDGES)?, &seqs)?
            .into_iter()
            .map(|(_, e)| e)
            .collect())
    }

    /// Calls `f` with each edge touching the node (matched lower-cased), in
    /// insertion order, until it returns `false`: a caller that needs a few of a
    /// node's edges reads only those, however many the node has.
    pub fn graph_edges_of_while(
        &self,
        node: &str,
        mut f: impl FnMut(EdgeRecord) -> bool,
    ) -> Result<()> {
        let lower = node.to_lowercase();
        let edges = self.txn().open_table(GRAPH_EDGES)?;
        for row in self.graph_adj()?.range((lower.as_str(), 0u64)..=(lower.as_str(), u64::MAX))? {
            let seq = row?.0.value().1;
            if let Some(v) = edges.get(seq)?
                && !f(decode(v.value(), "graph edge")?)
            {
                break;
            }
        }
        Ok(())
    }

    /// Whether a node with this lower-cased name has any edge.
    pub fn graph_has_node(&self, node_lower: &str) -> Result<bool> {
        let t = self.graph_adj()?;
        Ok(t.range((node_lower, 0u64)..=(node_lower, u64::MAX))?.next().is_some())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::EdgeRecord;
    use crate::Memory;

    const NAMES: [&str; 4] = ["Ana", "ana", "Bo", "Cy"];
    const RELATIONS: [&str; 2] = ["knows", "works_with"];

    proptest! {
        /// An edge is added unless an identical active one (same source, target and
        /// relation, exactly) exists, as a scan of every edge decides; expired
        /// edges, self-loops, names differing only in case and forgotten entities
        /// included; the graph's indexes check clean after every sequence.
        #[test]
        fn an_edge_is_added_unless_an_identical_active_one_exists(
            ops in proptest::collection::vec((0usize..4, 0usize..4, 0usize..2, 0u8..7), 1..40),
        ) {
            let mem = Memory::builder().open_in_memory().expect("store");
            let mut oracle: Vec<EdgeRecord> = Vec::new();
            for (s, t, r, act) in ops {
                let edge = EdgeRecord {
                    source: NAMES[s].into(),
                    target: NAMES[t].into(),
                    relation: RELATIONS[r].into(),
                    valid_from: 0,
                    valid_to: None,
                    metadata: None,
                };
                if act == 1 {
                    // Forgotten: every edge touching the name, whatever the case.
                    let name = NAMES[s].to_lowercase();
                    mem.forget_entity(&name).expect("forget");
                    oracle.retain(|e| {
                        e.source.to_lowercase() != name && e.target.to_lowercase() != name
                    });
                    continue;
                }
                if act == 0 {
                    // Stored as is (as a restore does), then expired or not.
                    let mut e = edge.clone();
                    e.valid_to = (s % 2 == 0).then_some(1);
                    mem.write(|w| w.graph_push_edge(&e)).expect("push");
                    oracle.push(e);
                    continue;
                }
                let same = |e: &EdgeRecord| {
                    e.source == edge.source
                        && e.target == edge.target
                        && e.relation == edge.relation
                        && e.is_active()
                };
                let expected = !oracle.iter().any(same);
                let added = mem.write(|w| w.graph_add_relationship(edge.clone())).expect("add");
                prop_assert_eq!(added, expected);
                if expected {
                    oracle.push(edge);
                }
            }
            prop_assert_eq!(mem.read().expect("read").graph_edges().expect("edges"), oracle);
            let report = mem.check(|_| {}).expect("check");
            prop_assert!(report.is_ok(), "{:?}", report.problems);
        }
    }
}
