//! Fills a store with N synthetic memories (for dump/restore measurements):
//! `cargo run --release --example bulk_store -- PATH N`.
#![allow(clippy::unwrap_used)]

use soulmem::{Memory, MemoryEntry, MemoryType, Settings};

const WORDS: [&str; 40] = [
    "alice",
    "berlin",
    "lisbon",
    "python",
    "postgres",
    "coffee",
    "green",
    "tea",
    "runs",
    "marathon",
    "project",
    "heron",
    "lantern",
    "deploy",
    "migration",
    "failed",
    "works",
    "globex",
    "analyst",
    "learning",
    "portuguese",
    "spring",
    "river",
    "walk",
    "album",
    "favorite",
    "season",
    "cycling",
    "kotlin",
    "rust",
    "server",
    "database",
    "error",
    "weekend",
    "family",
    "dinner",
    "recipe",
    "garden",
    "guitar",
    "novel",
];

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("PATH");
    let n: u64 = args.next().map_or(1_000_000, |s| s.parse().unwrap());
    let chunk = 50_000u64;
    let mut settings = Settings::for_profile(soulmem::Profile::Default);
    settings.durable = false;
    let mem = Memory::builder().settings(settings).open(&path).unwrap();
    let start = std::time::Instant::now();
    let base = soulmem::model::time::parse_timestamp("2025-01-01T00:00:00").unwrap();
    let mut i = 0u64;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while i < n {
        let mut batch = Vec::with_capacity(chunk as usize);
        for _ in 0..chunk.min(n - i) {
            let (kind, layer) = match i % 10 {
                0..=3 => (MemoryType::Semantic, "semantic"),
                4..=6 => (MemoryType::Episodic, "episodic"),
                7 => (MemoryType::Procedural, "procedural"),
                8 => (MemoryType::Social, "social"),
                _ => (MemoryType::Semantic, "notes"),
            };
            let mut words = Vec::with_capacity(14);
            for _ in 0..12 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                words.push(WORDS[(x % 40) as usize]);
            }
            let content = format!("User {} number {i}", words.join(" "));
            let mut e = MemoryEntry::new(kind, content);
            e.id = format!("{i:012x}");
            e.layer = layer.to_owned();
            e.domain = ["default", "work", "home", "travel"][(i % 4) as usize].to_owned();
            e.user_id = Some(format!("user{}", i % 7));
            e.importance = (1 + i % 10) as u8;
            e.created_at = base + chrono::Duration::seconds(i as i64 * 37);
            e.entities = vec![words[0].to_owned()];
            batch.push(e);
            i += 1;
        }
        mem.add_batch(batch).unwrap();
        eprintln!("{i} memories, {:.1} s", start.elapsed().as_secs_f64());
    }
}
