//! Heuristic entity extraction and the knowledge-graph updates it implies.
//!
//! [`extract_entities`] mirrors soul-protocol 0.4.0's `MemoryManager.extract_entities`:
//! known technologies, capitalised words (as people), topic phrases from first-person
//! speech, the first-person relation of each entity to the user ("I use X" → `uses`)
//! and third-person relations between named entities ("Priya reports to Tomas").
//! [`graph_updates`] turns that into graph nodes and edges: under
//! [`Profile::Reference`] exactly what `Soul.observe` step 7 does (a node per entity
//! and an edge entity → `"user"` with the first-person relation; third-person
//! relations are dropped, QUIRKS §2.2); under [`Profile::Default`] the third-person
//! relations are added too.
//!
//! The default profile also fixes Q18 (see [`extract_entities`]).

use std::sync::LazyLock;

use foldhash::HashMap;
use regex::Regex;
use serde::Serialize;

use super::facts::{TRAILING_FILLER_SET, clause_capture, compile, py_pattern, py_split, py_strip};
use crate::profile::Profile;
use crate::text::WordSet;

// ---------------------------------------------------------------------------
// Output types
// ---------------------------------------------------------------------------

/// What kind of thing an entity is (the reference's `type` strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntityKind {
    /// A known technology (`KNOWN_TECH`).
    Technology,
    /// A capitalised word, or a named party of a third-person relation.
    Person,
    /// Something the user builds.
    Project,
    /// The user's role ("I'm a data engineer").
    Role,
    /// A subject the user works on, is interested in or manages.
    Topic,
    /// An employer ("working at Acme Corp").
    Organization,
}

impl EntityKind {
    /// The reference's spelling (`"technology"`, `"person"`, …).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            EntityKind::Technology => "technology",
            EntityKind::Person => "person",
            EntityKind::Project => "project",
            EntityKind::Role => "role",
            EntityKind::Topic => "topic",
            EntityKind::Organization => "organization",
        }
    }
}

/// A directed relation to another named node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct EntityRelation {
    /// The other node's name, as written.
    pub target: String,
    /// The relation label (`reports_to`, `uses`, …).
    pub relation: &'static str,
}

/// One extracted entity, with the fields of the reference's entity dict in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExtractedEntity {
    /// The name as written (first occurrence).
    pub name: String,
    /// Its kind (the dict's `type`).
    #[serde(rename = "type")]
    pub kind: EntityKind,
    /// The first-person relation of the user to it (`uses`, `builds`, `prefers`,
    /// `works_at`, `learns`, `is`, `works_on`, `interested_in`, `manages`), if any.
    pub relation: Option<&'static str>,
    /// Third-person relations from this entity to other named entities.
    pub relationships: Vec<EntityRelation>,
}

/// The entities of one exchange, in the reference's order (dict insertion order).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ExtractedEntities {
    /// The entities.
    pub entities: Vec<ExtractedEntity>,
}

impl ExtractedEntities {
    /// Number of entities.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// `true` when nothing was extracted.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// The entities in order.
    pub fn iter(&self) -> std::slice::Iter<'_, ExtractedEntity> {
        self.entities.iter()
    }

    /// The names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entities.iter().map(|e| e.name.as_str())
    }
}

impl<'a> IntoIterator for &'a ExtractedEntities {
    type Item = &'a ExtractedEntity;
    type IntoIter = std::slice::Iter<'a, ExtractedEntity>;
    fn into_iter(self) -> Self::IntoIter {
        self.entities.iter()
    }
}

/// The node the user is, target of every first-person relation edge.
pub const USER_NODE: &str = "user";

/// One node to add to the knowledge graph with its outgoing edges (the shape
/// `update_graph` takes). Adding an edge also adds a missing target node with type
/// `"unknown"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GraphUpdate {
    /// The node name.
    pub name: String,
    /// The node type (an [`EntityKind`] spelling).
    pub entity_type: &'static str,
    /// Edges from this node, in order.
    pub relationships: Vec<EntityRelation>,
}

/// What to add to the knowledge graph for `extracted`.
///
/// Both profiles: a node per entity, and when it has a first-person relation an edge
/// entity → [`USER_NODE`] with that label. Default profile only: the third-person
/// relations too (the reference computes them but `Soul.observe` drops them).
#[must_use]
pub fn graph_updates(extracted: &ExtractedEntities, profile: Profile) -> Vec<GraphUpdate> {
    extracted
        .iter()
        .map(|e| {
            let mut relationships = Vec::new();
            if let Some(relation) = e.relation {
                relationships.push(EntityRelation { target: USER_NODE.to_owned(), relation });
            }
            if !profile.is_reference() {
                // QUIRKS §2.2: third-person relations reach the graph.
                relationships.extend(e.relationships.iter().cloned());
            }
            GraphUpdate { name: e.name.clone(), entity_type: e.kind.as_str(), relationships }
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Word lists
// ---------------------------------------------------------------------------

/// The reference's `KNOWN_TECH` (lower case).
#[rustfmt::skip]
pub const KNOWN_TECH: &[&str] = &[
    "python", "javascript", "typescript", "rust", "go", "java", "ruby", "swift", "react", "vue",
    "angular", "django", "flask", "fastapi", "express", "nextjs", "docker", "kubernetes", "aws",
    "gcp", "azure", "firebase", "supabase", "postgres", "mysql", "mongodb", "redis", "sqlite",
    "git", "github", "gitlab", "vscode", "neovim", "vim", "linux", "macos", "windows", "ubuntu",
    "openai", "anthropic", "claude", "gpt", "gemini", "ollama", "langchain", "pocketpaw",
    "soul-protocol",
];

/// The reference's `_STOP_WORDS`.
const STOP_WORDS: &[&str] = &[
    "i", "the", "a", "an", "is", "are", "was", "were", "be", "been", "it", "its", "my", "we",
    "our", "you", "your", "he", "she", "they", "this", "that", "these", "those", "what", "which",
    "who", "how", "can", "could", "will", "would", "should", "do", "does", "did", "but", "and",
    "or", "not", "no", "yes", "so", "if", "then", "also", "just", "very", "really", "well", "here",
    "there", "user", "agent", "let", "me", "hi", "hello", "hey", "thanks", "thank", "please",
    "sure", "okay", "ok",
];

static KNOWN_TECH_SET: WordSet = WordSet::new(KNOWN_TECH);
static STOP_SET: WordSet = WordSet::new(STOP_WORDS);
static NOT_NAMES_SET: WordSet = WordSet::new(NOT_NAMES);
static TECH_CUE_BEFORE_SET: WordSet = WordSet::new(TECH_CUE_BEFORE);
static TECH_CUE_AFTER_SET: WordSet = WordSet::new(TECH_CUE_AFTER);
static ABBREVIATIONS_SET: WordSet = WordSet::new(ABBREVIATIONS);

fn is_tech(lower: &str) -> bool {
    KNOWN_TECH_SET.contains(lower)
}

fn is_stop(lower: &str) -> bool {
    STOP_SET.contains(lower)
}

/// Technology names that are also everyday English words (default profile).
const AMBIGUOUS_TECH: &[&str] =
    &["go", "rust", "swift", "express", "windows", "react", "ruby", "java", "flask", "git"];

/// Words before an ambiguous technology name that make it one ("using go").
#[rustfmt::skip]
const TECH_CUE_BEFORE: &[&str] = &[
    "use", "uses", "using", "used", "learn", "learning", "learned", "learnt", "study", "studying",
    "know", "code", "coding", "write", "writing", "wrote", "program", "programming", "in",
];

/// Words after an ambiguous technology name that make it one ("go code").
#[rustfmt::skip]
const TECH_CUE_AFTER: &[&str] = &[
    "language", "lang", "code", "codebase", "programming", "developer", "developers", "dev", "devs",
    "app", "apps", "framework", "library", "libraries", "compiler", "toolchain", "crate", "crates",
    "module", "modules", "package", "packages", "server", "service", "services", "backend",
    "frontend", "binary", "sdk", "api", "version", "project", "repo", "components", "component",
    "hooks", "router", "generics", "channels", "routine", "routines",
];

/// Capitalised words that are not names (default profile): titles and title-like
/// words, greetings and reactions, days and months.
#[rustfmt::skip]
const NOT_NAMES: &[&str] = &[
    // titles and title-like words
    "dr", "mr", "mrs", "ms", "mx", "prof", "sir", "dame", "st", "mt", "jr", "sr", "rev", "hon",
    "gen", "col", "capt", "lt", "sgt", "series", "building", "chapter", "section", "phase", "part",
    "episode", "season", "volume", "room", "floor", "suite", "level", "version",
    // reactions, greetings and sentence openers
    "wow", "great", "yeah", "yep", "yup", "nope", "cool", "glad", "congrats", "congratulations",
    "awesome", "agreed", "noted", "sounds", "nice", "oh", "ah", "hmm", "haha", "lol", "welcome",
    "sorry", "right", "exactly", "absolutely", "anytime", "bye", "goodbye", "good", "see", "since",
    "kind", "seeing", "talk", "cheers", "indeed", "totally", "definitely", "of",
    // calendar
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january",
    "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december",
];

/// Abbreviations whose period does not end a sentence (default profile).
const ABBREVIATIONS: &[&str] = &[
    "dr", "mr", "mrs", "ms", "mx", "prof", "st", "mt", "jr", "sr", "rev", "vs", "etc", "e.g",
    "i.e", "approx", "no", "inc", "ltd", "co", "corp",
];

// ---------------------------------------------------------------------------
// Patterns
// ---------------------------------------------------------------------------

/// A word: a word character, then word characters or hyphens.
static WORD: LazyLock<Regex> = LazyLock::new(|| compile(&py_pattern(r"[\w][\w\-]*"), false));
static SENTENCE_SPLIT: LazyLock<Regex> = LazyLock::new(|| compile(r"[.!?]+", false));

/// The reference's `_TOPIC_CAPTURE`: one to five (hyphenated) words.
const TOPIC_CAPTURE: &str = r"(\w[\w-]*(?:\s+\w[\w-]*){0,4})";

/// `(pattern, ignore case, kind, relation)` in the reference's order (`_TOPIC_PATTERNS`).
fn reference_topic_patterns() -> Vec<(String, bool, EntityKind, &'static str)> {
    let tc = TOPIC_CAPTURE;
    vec![
        (format!(r"i(?:'m| am) (?:a |an ){tc}"), true, EntityKind::Role, "is"),
        (format!(r"i work on {tc}"), true, EntityKind::Topic, "works_on"),
        (format!(r"i(?:'m| am) interested in {tc}"), true, EntityKind::Topic, "interested_in"),
        (format!(r"i(?:'m| am) working on {tc}"), true, EntityKind::Topic, "works_on"),
        (
            r"(?:work|working) (?:at|for) ((?:[A-Z][\w]*(?:\s+[A-Z][\w]*){0,3}))".to_owned(),
            false,
            EntityKind::Organization,
            "works_at",
        ),
        (
            r"(?:project|app|tool|product) (?:is |called |named )([\w][\w\-]+)".to_owned(),
            true,
            EntityKind::Project,
            "builds",
        ),
        (
            format!(r"i (?:manage|lead|run|own) (?:a |the )?{tc}"),
            true,
            EntityKind::Topic,
            "manages",
        ),
        (
            format!(r"we(?:'re| are) (?:building|creating|making|developing) {tc}"),
            true,
            EntityKind::Project,
            "builds",
        ),
    ]
}

struct TopicPattern {
    regex: Regex,
    kind: EntityKind,
    relation: &'static str,
}

static REFERENCE_TOPICS: LazyLock<Vec<TopicPattern>> = LazyLock::new(|| {
    reference_topic_patterns()
        .into_iter()
        .map(|(p, ic, kind, relation)| TopicPattern {
            regex: compile(&py_pattern(&p), ic),
            kind,
            relation,
        })
        .collect()
});

/// How a default topic capture is cleaned.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TopicRule {
    /// Clause cut, leading article dropped.
    Phrase,
    /// Capitalised words as captured.
    Name,
    /// A project name after "is": only when capitalised.
    CapitalisedName,
}

struct DefaultTopic {
    regex: Regex,
    kind: EntityKind,
    relation: &'static str,
    rule: TopicRule,
}

/// Topic capture for the default profile: words may hold apostrophes, and the
/// phrase stays on one line.
const DEFAULT_TOPIC_CAPTURE: &str = r"(\w[\w'’\-]*(?:[^\S\n]+\w[\w'’\-]*){0,4})";
const IM: &str = r"\bi(?:['’]m|\s+am)\s+";

static DEFAULT_TOPICS: LazyLock<Vec<DefaultTopic>> = LazyLock::new(|| {
    let tc = DEFAULT_TOPIC_CAPTURE;
    let t = |p: String, ic: bool, kind, relation, rule| DefaultTopic {
        regex: compile(&p, ic),
        kind,
        relation,
        rule,
    };
    vec![
        t(format!(r"{IM}(?:a|an)\s+{tc}"), true, EntityKind::Role, "is", TopicRule::Phrase),
        t(format!(r"\bi\s+work\s+on\s+{tc}"), true, EntityKind::Topic, "works_on", TopicRule::Phrase),
        t(
            format!(r"{IM}interested\s+in\s+{tc}"),
            true,
            EntityKind::Topic,
            "interested_in",
            TopicRule::Phrase,
        ),
        t(format!(r"{IM}working\s+on\s+{tc}"), true, EntityKind::Topic, "works_on", TopicRule::Phrase),
        t(
            r"\b(?:[Ww]ork|[Ww]orking)\s+(?:at|for)\s+((?:(?:St|Mt)\.\s+)?[A-Z][\w&'’\-]*(?:[^\S\n]+[A-Z][\w&'’\-]*){0,3})"
                .to_owned(),
            false,
            EntityKind::Organization,
            "works_at",
            TopicRule::Name,
        ),
        // Q18: "the project is called Lighthouse" names Lighthouse, not "called".
        t(
            r"\b(?:project|app|tool|product)\s+(?:is\s+)?(?:called|named)\s+([\w][\w\-]+)".to_owned(),
            true,
            EntityKind::Project,
            "builds",
            TopicRule::Name,
        ),
        t(
            r"\b(?:project|app|tool|product)\s+is\s+([\w][\w\-]+)".to_owned(),
            true,
            EntityKind::Project,
            "builds",
            TopicRule::CapitalisedName,
        ),
        t(
            format!(r"\bi\s+(?:manage|lead|run|own)\s+(?:a\s+|the\s+)?{tc}"),
            true,
            EntityKind::Topic,
            "manages",
            TopicRule::Phrase,
        ),
        t(
            format!(r"\bwe(?:['’]re|\s+are)\s+(?:building|creating|making|developing)\s+{tc}"),
            true,
            EntityKind::Project,
            "builds",
            TopicRule::Phrase,
        ),
    ]
});

/// The reference's `ENTITY_RELATIONS` prefixes, each followed by `\s+`; an entity
/// gets the relation when its name follows one of them.
fn relation_prefixes(default: bool) -> Vec<(Regex, &'static str)> {
    let (b, im) = if default { (r"\b", r"i(?:['’]m|\s+am)") } else { ("", r"i(?:'m| am)") };
    let pats = [
        (format!(r"{b}i (?:use|am using|work with)\b\s+"), "uses"),
        (format!(r"{b}{im} (?:building|creating|making)\b\s+"), "builds"),
        (format!(r"{b}i (?:prefer|like|love)\b\s+"), "prefers"),
        (format!(r"{b}i (?:work at|work for)\b\s+"), "works_at"),
        (format!(r"{b}{im} (?:learning|studying)\b\s+"), "learns"),
    ];
    pats.into_iter()
        .map(|(p, rel)| {
            // The default profile also accepts any white space between words.
            let p = if default { p.replace(' ', r"\s+") } else { p };
            (compile(&py_pattern(&p), true), rel)
        })
        .collect()
}

static REFERENCE_RELATIONS: LazyLock<Vec<(Regex, &'static str)>> =
    LazyLock::new(|| relation_prefixes(false));
static DEFAULT_RELATIONS: LazyLock<Vec<(Regex, &'static str)>> =
    LazyLock::new(|| relation_prefixes(true));

/// The reference's `_THIRD_PERSON_RELATION_PATTERNS` (subject, object).
static THIRD_PERSON: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        (r"(\w+)'s\s+manager\s+is\s+(\w+)", "managed_by"),
        (r"(\w+)\s+reports?\s+to\s+(\w+)", "reports_to"),
        (r"(\w+)\s+manages?\s+(\w+)", "manages"),
        (
            r"(\w+)\s+is\s+(?:the\s+)?(?:ceo|cto|coo|cfo|vp|head|director|lead|manager)\s+of\s+(\w+)",
            "leads",
        ),
        (r"(\w+)\s+(?:works?\s+(?:at|for)|joined?)\s+(\w+)", "works_at"),
        (r"(\w+)\s+and\s+(\w+)\s+are\s+colleagues?", "colleague"),
        (r"(\w+)\s+(?:is\s+)?(?:a\s+)?(?:friend|partner|colleague)\s+of\s+(\w+)", "related_to"),
        (r"(\w+)\s+founded?\s+(\w+)", "founded"),
    ]
    .into_iter()
    .map(|(p, rel)| (compile(&py_pattern(p), true), rel))
    .collect()
});

// ---------------------------------------------------------------------------
// The entity table (a dict in insertion order)
// ---------------------------------------------------------------------------

#[derive(Default)]
struct Table {
    list: Vec<ExtractedEntity>,
    index: HashMap<String, usize>,
}

impl Table {
    fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    fn insert(
        &mut self,
        key: String,
        name: &str,
        kind: EntityKind,
        relation: Option<&'static str>,
    ) {
        self.index.insert(key, self.list.len());
        self.list.push(ExtractedEntity {
            name: name.to_owned(),
            kind,
            relation,
            relationships: Vec::new(),
        });
    }

    fn remove(&mut self, key: &str) {
        if let Some(i) = self.index.remove(key) {
            self.list.remove(i);
            for v in self.index.values_mut() {
                if *v > i {
                    *v -= 1;
                }
            }
        }
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut ExtractedEntity> {
        self.index.get(key).and_then(|&i| self.list.get_mut(i))
    }
}

fn first_is_upper(s: &str) -> bool {
    s.chars().next().is_some_and(char::is_uppercase)
}

fn simple_lower(c: char) -> char {
    let mut it = c.to_lowercase();
    match (it.next(), it.next()) {
        (Some(l), None) => l,
        _ => c,
    }
}

fn simple_upper(c: char) -> char {
    let mut it = c.to_uppercase();
    match (it.next(), it.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

/// `text` starts with `name`, compared case-insensitively char by char (as a
/// case-insensitive regex of the escaped name would). Returns the rest of `text`.
fn strip_prefix_ignore_case<'t>(text: &'t str, name: &str) -> Option<&'t str> {
    let mut chars = text.char_indices();
    for n in name.chars() {
        let (_, t) = chars.next()?;
        if !(t == n || simple_lower(t) == simple_lower(n) || simple_upper(t) == simple_upper(n)) {
            return None;
        }
    }
    Some(chars.next().map_or("", |(i, _)| &text[i..]))
}

/// Where each relation prefix match ends, per relation, in `text`.
fn relation_ends(relations: &[(Regex, &'static str)], text: &str) -> Vec<Vec<usize>> {
    relations.iter().map(|(re, _)| re.find_iter(text).map(|m| m.end()).collect()).collect()
}

/// Gives each entity the first relation whose prefix is directly followed by its
/// name. `whole_word`: the name must also end at a word boundary (default).
fn first_person_pass(
    table: &mut Table,
    relations: &[(Regex, &'static str)],
    text: &str,
    whole_word: bool,
) {
    let ends = relation_ends(relations, text);
    for entity in &mut table.list {
        for ((_, relation), ends) in relations.iter().zip(&ends) {
            let found = ends.iter().any(|&end| {
                strip_prefix_ignore_case(&text[end..], &entity.name).is_some_and(|rest| {
                    !whole_word
                        || !rest.chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_')
                })
            });
            if found {
                entity.relation = Some(relation);
                if *relation == "builds" {
                    entity.kind = EntityKind::Project;
                }
                break;
            }
        }
    }
}

/// Adds third-person relations found in `text`. `accept` decides whether an
/// unknown capitalised word may become a person.
fn third_person_pass(table: &mut Table, text: &str, accept: &dyn Fn(&str) -> bool) {
    for (re, relation) in THIRD_PERSON.iter() {
        for caps in re.captures_iter(text) {
            let (Some(subj), Some(obj)) = (caps.get(1), caps.get(2)) else { continue };
            let (subj, obj) = (subj.as_str(), obj.as_str());
            let (subj_key, obj_key) = (subj.to_lowercase(), obj.to_lowercase());
            if subj_key == obj_key || is_stop(&subj_key) || is_stop(&obj_key) {
                continue;
            }
            for (key, raw) in [(&subj_key, subj), (&obj_key, obj)] {
                if !table.contains(key) {
                    if first_is_upper(raw) && accept(raw) {
                        table.insert(key.clone(), raw, EntityKind::Person, None);
                    } else {
                        break;
                    }
                }
            }
            if !table.contains(&subj_key) || !table.contains(&obj_key) {
                continue;
            }
            if let Some(e) = table.get_mut(&subj_key) {
                if !e.relationships.iter().any(|r| r.target == obj && r.relation == *relation) {
                    e.relationships.push(EntityRelation { target: obj.to_owned(), relation });
                }
            }
            if *relation == "colleague" {
                if let Some(e) = table.get_mut(&obj_key) {
                    if !e
                        .relationships
                        .iter()
                        .any(|r| r.target == subj && r.relation == "colleague")
                    {
                        e.relationships.push(EntityRelation { target: subj.to_owned(), relation });
                    }
                }
            }
        }
    }
}

/// Drops trailing stop words, joins with single spaces, checks length and the key;
/// inserts a topic entity.
fn insert_topic(table: &mut Table, raw: &str, kind: EntityKind, relation: &'static str) {
    let mut words: Vec<&str> = py_split(raw).collect();
    while words.last().is_some_and(|w| is_stop(&w.to_lowercase())) {
        words.pop();
    }
    let name = words.join(" ");
    let len = name.chars().count();
    if !(2..=60).contains(&len) {
        return;
    }
    let key = name.to_lowercase().replace(' ', "_");
    if table.contains(&key) || is_stop(&key) {
        return;
    }
    table.insert(key, &name, kind, Some(relation));
}

/// The default profile's topic insertion: like [`insert_topic`], but a topic whose
/// key is already a guessed person takes over that entry ("Our project is called
/// Lighthouse": Lighthouse is the project, not a person), and an organisation or
/// project name of several words replaces the people guessed from its words
/// ("Umbra Health" instead of the people "Umbra" and "Health") (Q18).
fn insert_topic_default(table: &mut Table, raw: &str, kind: EntityKind, relation: &'static str) {
    let mut words: Vec<&str> = py_split(raw).collect();
    while words.last().is_some_and(|w| is_stop(&w.to_lowercase())) {
        words.pop();
    }
    let name = words.join(" ");
    if !(2..=60).contains(&name.chars().count()) {
        return;
    }
    let key = name.to_lowercase().replace(' ', "_");
    if is_stop(&key) {
        return;
    }
    if let Some(existing) = table.get_mut(&key) {
        if existing.kind == EntityKind::Person {
            existing.kind = kind;
            existing.relation = Some(relation);
        }
        return;
    }
    if words.len() > 1 && matches!(kind, EntityKind::Organization | EntityKind::Project) {
        for word in WORD.find_iter(&name) {
            let k = word.as_str().to_lowercase();
            if table.get_mut(&k).is_some_and(|e| e.kind == EntityKind::Person) {
                table.remove(&k);
            }
        }
    }
    table.insert(key, &name, kind, Some(relation));
}

// ---------------------------------------------------------------------------
// Reference profile
// ---------------------------------------------------------------------------

fn extract_reference(user: &str, agent: &str) -> ExtractedEntities {
    let combined = format!("{user} {agent}");
    let mut table = Table::default();

    for word in WORD.find_iter(&combined) {
        let lower = word.as_str().to_lowercase();
        if is_tech(&lower) && !table.contains(&lower) {
            table.insert(lower, word.as_str(), EntityKind::Technology, None);
        }
    }

    for sentence in SENTENCE_SPLIT.split(&combined) {
        let sentence = py_strip(sentence);
        if sentence.is_empty() {
            continue;
        }
        for token in WORD.find_iter(sentence).skip(1) {
            let token = token.as_str();
            let lower = token.to_lowercase();
            if first_is_upper(token)
                && !is_stop(&lower)
                && !is_tech(&lower)
                && !table.contains(&lower)
                && token.chars().count() >= 2
            {
                table.insert(lower, token, EntityKind::Person, None);
            }
        }
    }

    for topic in REFERENCE_TOPICS.iter() {
        for caps in topic.regex.captures_iter(&combined) {
            let raw = caps.get(1).map_or("", |m| m.as_str());
            let raw = py_strip(raw).trim_end_matches(['.', ',', ';', ':', '!', '?']);
            insert_topic(&mut table, raw, topic.kind, topic.relation);
        }
    }

    first_person_pass(&mut table, &REFERENCE_RELATIONS, &combined, false);
    third_person_pass(&mut table, &combined, &|_| true);
    ExtractedEntities { entities: table.list }
}

// ---------------------------------------------------------------------------
// Default profile
// ---------------------------------------------------------------------------

/// Splits a text into sentences: at `.`, `!`, `?`, `:`, `;` and line breaks, except
/// a period inside a word ("Node.js", "3.5") or after an abbreviation ("Dr.").
fn default_sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes: Vec<(usize, char)> = text.char_indices().collect();
    for (k, &(i, c)) in bytes.iter().enumerate() {
        let boundary = match c {
            '!' | '?' | ':' | ';' | '\n' => true,
            '.' => {
                let next_alnum = bytes.get(k + 1).is_some_and(|&(_, n)| n.is_alphanumeric());
                let word_before: String = text[start..i]
                    .chars()
                    .rev()
                    .take_while(|ch| ch.is_alphanumeric() || *ch == '.')
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<String>()
                    .to_lowercase();
                !next_alnum && !ABBREVIATIONS_SET.contains(&word_before)
            }
            _ => false,
        };
        if boundary {
            out.push(&text[start..i]);
            start = i + c.len_utf8();
        }
    }
    out.push(&text[start..]);
    out
}

/// A capitalised token that may name a person (default profile, Q18): not an
/// acronym ("CEO", "API"), a title ("Dr", "Series"), a reaction ("Noted", "Wow") or
/// a day or month.
fn is_name_like(token: &str) -> bool {
    let letters: Vec<char> = token.chars().filter(|c| c.is_alphabetic()).collect();
    if letters.len() >= 2 && letters.iter().all(|c| c.is_uppercase()) {
        return false;
    }
    !NOT_NAMES_SET.contains(&token.to_lowercase())
}

/// An ambiguous technology word counts when written capitalised mid-sentence, or
/// next to a cue ("using go", "go code") (default profile, Q18).
fn tech_in_context(tokens: &[&str], i: usize) -> bool {
    let Some(token) = tokens.get(i) else { return false };
    let lower = token.to_lowercase();
    if !AMBIGUOUS_TECH.contains(&lower.as_str()) {
        return true;
    }
    if i > 0 && first_is_upper(token) {
        return true;
    }
    let before = i.checked_sub(1).and_then(|j| tokens.get(j)).map(|t| t.to_lowercase());
    let after = tokens.get(i + 1).map(|t| t.to_lowercase());
    before.is_some_and(|b| TECH_CUE_BEFORE_SET.contains(&b))
        || after.is_some_and(|a| TECH_CUE_AFTER_SET.contains(&a))
}

fn clean_topic(raw: &str, rule: TopicRule) -> Option<String> {
    match rule {
        TopicRule::Name => Some(py_strip(raw).to_owned()),
        TopicRule::CapitalisedName => {
            let lower = raw.to_lowercase();
            (first_is_upper(raw) && lower != "called" && lower != "named").then(|| raw.to_owned())
        }
        TopicRule::Phrase => {
            // Q18: the phrase ends at a clause boundary and drops a leading article
            // and trailing fillers ("a deployment dashboard for" → "deployment
            // dashboard").
            let cut = clause_capture(raw, usize::MAX, 2)?;
            let mut words: Vec<&str> = cut.split(' ').collect();
            if words.len() > 1 && matches!(words[0].to_lowercase().as_str(), "a" | "an" | "the") {
                words.remove(0);
            }
            while words.len() > 1
                && words.last().is_some_and(|w| TRAILING_FILLER_SET.contains(&w.to_lowercase()))
            {
                words.pop();
            }
            Some(words.join(" "))
        }
    }
}

fn extract_default(user: &str, agent: &str) -> ExtractedEntities {
    let mut table = Table::default();
    let sentences: Vec<Vec<&str>> = [user, agent]
        .iter()
        .flat_map(|text| default_sentences(text))
        .map(|s| WORD.find_iter(s).map(|m| m.as_str()).collect())
        .collect();

    for tokens in &sentences {
        for (i, token) in tokens.iter().enumerate() {
            let lower = token.to_lowercase();
            if is_tech(&lower) && !table.contains(&lower) && tech_in_context(tokens, i) {
                table.insert(lower, token, EntityKind::Technology, None);
            }
        }
    }

    // Q18: the user's and the agent's turns are split apart (the agent's opening
    // "Noted" is not mid-sentence), and titles, acronyms and reactions are not people.
    for tokens in &sentences {
        for token in tokens.iter().skip(1) {
            let lower = token.to_lowercase();
            if first_is_upper(token)
                && !is_stop(&lower)
                && !is_tech(&lower)
                && !table.contains(&lower)
                && token.chars().count() >= 2
                && is_name_like(token)
            {
                table.insert(lower, token, EntityKind::Person, None);
            }
        }
    }

    // First-person topics and relations come from the user's turn only (Q3).
    for topic in DEFAULT_TOPICS.iter() {
        for caps in topic.regex.captures_iter(user) {
            let raw = caps.get(1).map_or("", |m| m.as_str());
            if let Some(name) = clean_topic(raw, topic.rule) {
                insert_topic_default(&mut table, &name, topic.kind, topic.relation);
            }
        }
    }

    // Q18: the name must end at a word boundary ("I use Gold" is not "uses Go").
    first_person_pass(&mut table, &DEFAULT_RELATIONS, user, true);
    for text in [user, agent] {
        third_person_pass(&mut table, text, &is_name_like);
    }
    ExtractedEntities { entities: table.list }
}

/// Extracts the entities of one exchange.
///
/// Reference: `extract_entities` on `user + " " + agent`, accidents included (Q18).
/// Default: the same passes, with these fixes:
/// - each turn is split into sentences on its own (also at `:`, `;` and line
///   breaks, not after "Dr." or inside "Node.js");
/// - technology names that are everyday words (go, rust, swift, express, windows,
///   react, ruby, java, flask, git) count only when capitalised mid-sentence or
///   next to a cue word ("using go", "go code");
/// - acronyms, titles, reactions, days and months are not people;
/// - topic phrases end at a clause boundary, without a leading article or trailing
///   filler; "the project is called X" yields X; "the project is X" only a
///   capitalised X;
/// - first-person topics and relations are read from the user's turn only, and a
///   relation needs the whole name ("I use Gold" does not relate Go);
/// - third-person relations are read per turn.
#[must_use]
pub fn extract_entities(user: &str, agent: &str, profile: Profile) -> ExtractedEntities {
    match profile {
        Profile::Reference => extract_reference(user, agent),
        Profile::Default => extract_default(user, agent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(user: &str, agent: &str, profile: Profile) -> Vec<String> {
        extract_entities(user, agent, profile).names().map(str::to_owned).collect()
    }

    fn names_of(e: &ExtractedEntities) -> Vec<&str> {
        e.names().collect()
    }

    fn find<'a>(e: &'a ExtractedEntities, name: &str) -> Option<&'a ExtractedEntity> {
        e.iter().find(|x| x.name == name)
    }

    #[test]
    fn reference_keeps_q18() {
        let r = Profile::Reference;
        assert_eq!(names("I want to go home", "", r), vec!["go"]);
        assert_eq!(names("I saw Dr. Okafor today", "", r), vec!["Dr"]);
        assert!(names("Our project is called Lighthouse", "", r).contains(&"called".to_owned()));
        assert_eq!(names("I moved to Oslo", "Noted.", r), vec!["Oslo", "Noted"]);
    }

    #[test]
    fn default_ambiguous_tech_needs_context() {
        let d = Profile::Default;
        assert!(names("I want to go home", "", d).is_empty());
        assert_eq!(names("I write Go at work", "", d), vec!["Go"]);
        assert_eq!(names("I'm learning rust", "", d), vec!["rust"]);
        let e = extract_entities("I use Docker daily", "", d);
        assert_eq!(find(&e, "Docker").and_then(|x| x.relation), Some("uses"));
    }

    #[test]
    fn default_titles_and_openers_are_not_people() {
        let d = Profile::Default;
        assert_eq!(names("I saw Dr. Okafor today", "", d), vec!["Okafor"]);
        assert_eq!(names("I moved to Oslo", "Noted.", d), vec!["Oslo"]);
        assert!(names("Our CEO closed the Series A round", "", d).is_empty());
        assert_eq!(names("Caroline: Since we spoke, Mel called", "", d), vec!["Mel"]);
    }

    #[test]
    fn default_topics_end_at_clause_boundary() {
        let d = Profile::Default;
        let e = extract_entities("I'm a structural engineer and I mostly design bridges", "", d);
        assert_eq!(find(&e, "structural engineer").and_then(|x| x.relation), Some("is"));
        let e = extract_entities("We're building a deployment dashboard for the team", "", d);
        assert!(find(&e, "deployment dashboard").is_some(), "{e:?}");
        let e = extract_entities("Our project is called Lighthouse", "", d);
        let l = find(&e, "Lighthouse").map(|x| (x.kind, x.relation));
        assert_eq!(l, Some((EntityKind::Project, Some("builds"))));
        assert!(find(&e, "called").is_none());
        let e = extract_entities("I work at Umbra Health now", "", d);
        assert_eq!(names_of(&e), vec!["Umbra Health"]);
        assert_eq!(find(&e, "Umbra Health").map(|x| x.kind), Some(EntityKind::Organization));
        let e = extract_entities("Since spring I work at St. Olav's hospital", "", d);
        assert_eq!(names_of(&e), vec!["St. Olav's"]);
    }

    #[test]
    fn graph_updates_per_profile() {
        let user = "Priya reports to Tomas. I use Python";
        for profile in [Profile::Reference, Profile::Default] {
            let e = extract_entities(user, "", profile);
            let g = graph_updates(&e, profile);
            let priya = g.iter().find(|u| u.name == "Priya").map(|u| u.relationships.clone());
            let py = g.iter().find(|u| u.name == "Python").map(|u| u.relationships.clone());
            assert_eq!(py, Some(vec![EntityRelation { target: "user".into(), relation: "uses" }]));
            let want = if profile.is_reference() {
                vec![]
            } else {
                vec![EntityRelation { target: "Tomas".into(), relation: "reports_to" }]
            };
            assert_eq!(priya, Some(want), "{profile:?}");
        }
    }
}
