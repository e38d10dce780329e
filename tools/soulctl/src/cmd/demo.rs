//! `soulctl demo`: the main job on an embedded default.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use soulmem::write::observe::ObserveOptions;
use soulmem::{Memory, RecallQuery};

/// Arguments of `demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Keep an existing demo store instead of starting fresh.
    #[arg(long)]
    keep: bool,
}

const CONVERSATION: &[(&str, &str)] = &[
    ("Hi! My name is Alice and I live in Berlin.", "Nice to meet you, Alice!"),
    ("I work at Globex as a data analyst, mostly Python and Postgres.", "Sounds like fun work."),
    ("I prefer tea over coffee, especially green tea in the morning.", "Noted, green tea it is."),
    ("I'm learning Portuguese because we're moving next spring.", "Boa sorte! That's exciting."),
    (
        "Ugh, the Postgres migration failed again and I'm really frustrated.",
        "Let's look at the error log together.",
    ),
    ("Update: I moved to Lisbon last month, I live in Lisbon now.", "Welcome to Lisbon!"),
    ("My favorite food is pastel de nata.", "A classic choice."),
    ("lol ok", "😊"),
];

const QUERIES: &[&str] = &["where do I live", "database errors", "tea or coffee"];

/// Runs `demo`.
pub fn run(db: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let path = db.unwrap_or_else(|| PathBuf::from("soulmem-demo.redb"));
    if !args.keep && path.exists() {
        soulmem::storage::remove_store(&path)
            .with_context(|| format!("removing old {}", path.display()))?;
    }
    let mem = Memory::open(&path).with_context(|| format!("opening {}", path.display()))?;
    outln!("soulmem demo: store {} (profile {})\n", path.display(), mem.profile().as_str());
    let opts = ObserveOptions { user_id: Some("alice".into()), ..ObserveOptions::default() };
    for (user, agent) in CONVERSATION {
        let r = mem.observe_pair(user, agent, &opts)?;
        outln!("observe  {user:?}");
        outln!(
            "         significance {:.2}{}  mood {} (valence {:+.2})",
            r.significance,
            if r.episodic_id.is_some() { ", stored as an episode" } else { ", not stored" },
            r.somatic.label,
            r.somatic.valence
        );
        for f in &r.facts {
            outln!("         + fact: {}", f.content);
        }
        for s in &r.superseded {
            outln!("         - superseded: {} ({})", s.content, s.cause);
        }
        if !r.entities.is_empty() {
            let names: Vec<String> =
                r.entities.iter().map(|e| format!("{} ({})", e.name, e.entity_type)).collect();
            outln!("         entities: {}", names.join(", "));
        }
    }
    outln!("\nwhat it now remembers (active facts):");
    for f in mem.facts(false)? {
        outln!("  - {}", f.content);
    }
    let old: Vec<String> =
        mem.facts(true)?.into_iter().filter(|f| f.is_superseded()).map(|f| f.content).collect();
    if !old.is_empty() {
        outln!("kept but superseded: {}", old.join("; "));
    }
    for q in QUERIES {
        let mut query = RecallQuery::new(*q);
        query.limit = 3;
        query.user_id = Some("alice".into());
        let res = mem.recall(&query)?;
        outln!("\nrecall {q:?}");
        for (m, parts) in res.memories.iter().zip(res.trace.candidates.iter()) {
            let s = parts.score.clone().unwrap_or_default();
            outln!(
                "  {:>6.3}  {}   [base {:.2}, spread {:.2}, emotion {:.2}, via {}]",
                s.total,
                m.content.replace('\n', " / "),
                s.base,
                s.spread,
                s.emotion,
                parts.source
            );
        }
    }
    let stats = mem.stats()?;
    outln!(
        "\n{} memories in {} ({} index rows)",
        stats.memories,
        path.display(),
        stats.index_rows.values().sum::<u64>()
    );
    Ok(ExitCode::SUCCESS)
}
