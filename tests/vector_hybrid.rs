//! Vector strategy: stored vectors follow their memories, hybrid recall adds vector
//! candidates and fuses their similarity, filters apply to them.

use std::sync::Arc;

use soulmem::write::observe::ObserveOptions;
use soulmem::{
    Embedder, HashingEmbedder, Memory, MemoryEntry, MemoryType, PrecomputedEmbedder, RecallQuery,
    Remember, Settings, TfIdfEmbedder, Visibility,
};

fn assert_consistent(mem: &Memory) {
    let report = mem.check(|_| {}).expect("check runs");
    assert!(report.is_ok(), "index problems: {:#?}", report.problems);
}

fn hashing_memory() -> Memory {
    Memory::builder().embedder(Arc::new(HashingEmbedder::new(256))).open_in_memory().expect("open")
}

#[test]
fn vectors_are_stored_with_their_memories_and_removed_with_them() {
    let mem = hashing_memory();
    let a = mem.remember(&Remember::new("semantic", "User paints sunsets by the lake")).expect("a");
    let b = mem.remember(&Remember::new("procedural", "Deploy with docker compose")).expect("b");
    mem.observe_pair("I painted the lake at dawn", "Lovely!", &ObserveOptions::default())
        .expect("observe");
    assert_consistent(&mem);

    let mut q = RecallQuery::new("painting the lake");
    q.explain = true;
    let r = mem.recall(&q).expect("recall");
    assert!(mem.count().expect("count") >= 2);
    assert_eq!(r.trace.vectors_read, mem.count().expect("count"), "every memory has a vector");
    let top = r.trace.candidates.iter().find(|c| c.id == a).expect("a is a candidate");
    assert!(top.score.as_ref().is_some_and(|s| s.vector > 0.3), "{top:?}");

    assert!(mem.remove(&b).expect("remove"));
    assert_consistent(&mem);
    let r = mem.recall(&q).expect("recall");
    assert!(r.memories.iter().all(|m| m.id != b));

    // An update of the content re-embeds it.
    let mut e = mem.get(&a).expect("get").expect("a exists");
    e.content = "User deploys containers on Fridays".into();
    mem.update(e).expect("update");
    let mut q = RecallQuery::new("containers deploy");
    q.explain = true;
    let r = mem.recall(&q).expect("recall");
    let c = r.trace.candidates.iter().find(|c| c.id == a).expect("a is a candidate");
    assert!(c.score.as_ref().is_some_and(|s| s.vector > 0.5), "{c:?}");
    assert_consistent(&mem);
}

#[test]
fn embed_missing_fills_a_store_written_without_an_embedder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.redb");
    {
        let mem = Memory::open(&path).expect("open");
        mem.remember(&Remember::new("semantic", "User likes green tea")).expect("remember");
        mem.remember(&Remember::new("semantic", "User owns a bicycle")).expect("remember");
    }
    let mem = Memory::builder()
        .embedder(Arc::new(HashingEmbedder::new(128)))
        .open(&path)
        .expect("reopen");
    assert_eq!(mem.embed_missing().expect("embed"), 2);
    assert_eq!(mem.embed_missing().expect("embed again"), 0);
    assert_consistent(&mem);
    assert!(Memory::open_in_memory().expect("open").embed_missing().is_err());
}

/// Three hand-made directions: "dog" things, "weather" things, and a mix.
fn pets(weight: Option<f64>) -> (Memory, [String; 3]) {
    let v = |x: f32, y: f32| vec![x, y, 0.1];
    let emb = PrecomputedEmbedder::from_pairs([
        ("Tell me about my dog".to_owned(), v(1.0, 0.0)),
        ("Rex is my dog and he loves the park".to_owned(), v(0.9, 0.2)),
        ("I adopted a puppy from the shelter last spring".to_owned(), v(1.0, 0.05)),
        ("The dog days of summer were hot and humid".to_owned(), v(0.0, 1.0)),
    ])
    .expect("vectors");
    let mut settings = Settings::for_profile(soulmem::Profile::Default);
    if let Some(w) = weight {
        settings.hybrid_weight = w;
    }
    let mem = Memory::builder()
        .settings(settings)
        .embedder(Arc::new(emb))
        .open_in_memory()
        .expect("open");
    let ids = [
        "Rex is my dog and he loves the park",
        "I adopted a puppy from the shelter last spring",
        "The dog days of summer were hot and humid",
    ]
    .map(|t| mem.remember(&Remember::new("semantic", t)).expect("remember"));
    (mem, ids)
}

#[test]
fn hybrid_adds_vector_candidates_and_reorders() {
    let (mem, [rex, puppy, summer]) = pets(None);
    let mut q = RecallQuery::new("Tell me about my dog");
    q.hybrid = false;
    let lexical: Vec<String> =
        mem.recall(&q).expect("recall").memories.into_iter().map(|m| m.id).collect();
    assert!(lexical.contains(&rex) && lexical.contains(&summer));
    assert!(!lexical.contains(&puppy), "no shared word: lexical recall cannot find it");
    // The default weight adds the vector candidate.
    let got: Vec<String> = mem
        .recall(&RecallQuery::new("Tell me about my dog"))
        .expect("recall")
        .memories
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(got.contains(&puppy));

    // An even weight lets its similarity rank lift it over the weak text match.
    let (mem, [rex, puppy, summer]) = pets(Some(0.5));

    let mut q = RecallQuery::new("Tell me about my dog");
    q.explain = true;
    let r = mem.recall(&q).expect("recall");
    let ids: Vec<&str> = r.memories.iter().map(|m| m.id.as_str()).collect();
    let pos = |id: &str| ids.iter().position(|x| *x == id).expect("returned");
    assert!(pos(&puppy) < pos(&summer), "the puppy is closer in meaning: {ids:?}");
    assert!(pos(&rex) < pos(&summer), "{ids:?}");
    let c = r.trace.candidates.iter().find(|c| c.id == puppy).expect("traced");
    assert_eq!(c.source, "vector");
    assert!(c.bm25.abs() < f64::EPSILON);
    let s = c.score.as_ref().expect("scored");
    assert!(s.vector > 0.9, "{s:?}");
    assert_consistent(&mem);
}

#[test]
fn min_max_fusion_mixes_similarity_into_relevance() {
    let emb = PrecomputedEmbedder::from_pairs([
        ("Tell me about my dog".to_owned(), vec![1.0, 0.0]),
        ("I adopted a puppy from the shelter last spring".to_owned(), vec![1.0, 0.05]),
        ("The dog days of summer were hot and humid".to_owned(), vec![0.0, 1.0]),
    ])
    .expect("vectors");
    let mut settings = Settings::for_profile(soulmem::Profile::Default);
    settings.hybrid_fusion = soulmem::read::vector::HybridFusion::MinMax;
    let mem = Memory::builder()
        .settings(settings)
        .embedder(Arc::new(emb))
        .open_in_memory()
        .expect("open");
    let p = mem
        .remember(&Remember::new("semantic", "I adopted a puppy from the shelter last spring"))
        .expect("p");
    mem.remember(&Remember::new("semantic", "The dog days of summer were hot and humid"))
        .expect("s");
    let mut q = RecallQuery::new("Tell me about my dog");
    q.explain = true;
    let r = mem.recall(&q).expect("recall");
    let c = r.trace.candidates.iter().find(|c| c.id == p).expect("traced");
    assert!(c.score.as_ref().is_some_and(|s| s.spread > 0.0), "{c:?}");
}

#[test]
fn filters_apply_to_vector_candidates() {
    let emb = PrecomputedEmbedder::from_pairs([
        ("Tell me about my dog".to_owned(), vec![1.0, 0.0]),
        ("I adopted a puppy from the shelter".to_owned(), vec![1.0, 0.1]),
        ("My secret puppy diary".to_owned(), vec![0.95, 0.1]),
        ("Work puppy notes".to_owned(), vec![0.9, 0.1]),
    ])
    .expect("vectors");
    let mem = Memory::builder().embedder(Arc::new(emb)).open_in_memory().expect("open");
    let open = mem
        .remember(&Remember::new("semantic", "I adopted a puppy from the shelter"))
        .expect("open");
    let mut private = Remember::new("semantic", "My secret puppy diary");
    private.visibility = Visibility::Private;
    let private = mem.remember(&private).expect("private");
    let mut work = Remember::new("semantic", "Work puppy notes");
    work.domain = "work".into();
    let work = mem.remember(&work).expect("work");

    let mut q = RecallQuery::new("Tell me about my dog");
    q.requester_id = Some("someone".into());
    q.domain = Some("default".into());
    q.explain = true;
    let r = mem.recall(&q).expect("recall");
    let ids: Vec<&str> = r.memories.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, vec![open.as_str()]);
    for id in [&private, &work] {
        let c = r.trace.candidates.iter().find(|c| &c.id == id).expect("traced as dropped");
        assert_eq!(c.source, "vector");
        assert!(c.dropped_by.is_some(), "{c:?}");
    }

    let mut q = RecallQuery::new("Tell me about my dog");
    q.types = Some(vec!["episodic".into()]);
    assert!(mem.recall(&q).expect("recall").memories.is_empty());
}

#[test]
fn observe_stores_vectors_for_episodes_and_facts() {
    let texts = ["I love hiking in the Alps with my sister"];
    let emb = TfIdfEmbedder::fit(256, texts);
    let mem = Memory::builder().embedder(Arc::new(emb)).open_in_memory().expect("open");
    let report = mem
        .observe_pair(
            "I love hiking in the Alps with my sister",
            "Sounds great",
            &ObserveOptions::default(),
        )
        .expect("observe");
    assert!(report.episodic_id.is_some());
    let mut q = RecallQuery::new("mountain walks alps");
    q.explain = true;
    let r = mem.recall(&q).expect("recall");
    assert!(r.trace.vectors_read >= 1);
    assert!(r.trace.candidates.iter().any(|c| c.score.as_ref().is_some_and(|s| s.vector > 0.0)));
    assert_consistent(&mem);
}

#[test]
fn a_store_without_an_embedder_ranks_as_before() {
    let plain = Memory::open_in_memory().expect("open");
    let hybrid = hashing_memory();
    for m in [&plain, &hybrid] {
        for t in ["User likes green tea", "User drinks coffee daily", "Tea ceremony in Kyoto"] {
            let mut e = MemoryEntry::new(MemoryType::Semantic, t);
            e.id = t.replace(' ', "_").to_lowercase();
            m.add(e).expect("add");
        }
    }
    let mut q = RecallQuery::new("green tea");
    q.hybrid = false;
    let a: Vec<String> = plain.recall(&q).expect("a").memories.into_iter().map(|m| m.id).collect();
    let b: Vec<String> = hybrid.recall(&q).expect("b").memories.into_iter().map(|m| m.id).collect();
    assert_eq!(a, b);
    let e: &dyn Embedder = &HashingEmbedder::new(8);
    assert_eq!(e.dim(), 8);
}

/// Past `vector_scan_max` stored vectors, hybrid recall reads no vector beyond the
/// text and graph pool: the vector-only candidate is gone, similarity still reorders.
#[test]
fn large_stores_fuse_vectors_into_the_pool_without_scanning() {
    let v = |x: f32, y: f32| vec![x, y, 0.1];
    let emb = PrecomputedEmbedder::from_pairs([
        ("Tell me about my dog".to_owned(), v(1.0, 0.0)),
        ("Rex is my dog and he loves the park".to_owned(), v(0.9, 0.2)),
        ("I adopted a puppy from the shelter last spring".to_owned(), v(1.0, 0.05)),
        ("The dog days of summer were hot and humid".to_owned(), v(0.0, 1.0)),
    ])
    .expect("vectors");
    let mut settings = Settings::for_profile(soulmem::Profile::Default);
    settings.hybrid_weight = 0.5;
    settings.vector_scan_max = 2; // three vectors stored: over the bound
    let mem = Memory::builder()
        .settings(settings)
        .embedder(Arc::new(emb))
        .open_in_memory()
        .expect("open");
    for t in [
        "Rex is my dog and he loves the park",
        "I adopted a puppy from the shelter last spring",
        "The dog days of summer were hot and humid",
    ] {
        mem.remember(&Remember::new("semantic", t)).expect("remember");
    }
    let mut q = RecallQuery::new("Tell me about my dog");
    q.explain = true;
    let r = mem.recall(&q).expect("recall");
    assert_eq!(r.trace.vectors_read, 0, "no scan past the bound");
    let contents: Vec<&str> = r.memories.iter().map(|m| m.content.as_str()).collect();
    assert!(!contents.iter().any(|c| c.contains("puppy")), "{contents:?}");
    assert_eq!(contents.len(), 2, "{contents:?}");
    // Similarity still enters the score of the pooled text matches.
    let rex_c = r.trace.candidates.iter().find(|c| c.rank == Some(0)).expect("first");
    assert!(rex_c.score.as_ref().is_some_and(|s| s.vector > 0.9), "{rex_c:?}");
}
