//! The bodies of the fuzz targets, shared with the stable smoke test
//! (`tests/hostile_input.rs` includes this file). Each takes arbitrary bytes and
//! must not panic; errors are the expected outcome for most inputs.

#![allow(dead_code)]

use std::cell::RefCell;

use soulmem::replay::Replayer;
use soulmem::write::observe::ObserveOptions;
use soulmem::{Memory, MemoryDump, Profile, RecallQuery};

/// `.soul` import (zip archive, optionally encrypted; no password given).
pub fn soul_import(data: &[u8]) {
    let _ = soulmem::formats::read_soul(data, None);
}

/// The `to_dict()` JSON memory dump.
pub fn json_dump(data: &[u8]) {
    let _ = MemoryDump::from_json_slice(data, "fuzz");
}

thread_local! {
    static REPLAYER: RefCell<(u32, Option<Replayer>)> = const { RefCell::new((0, None)) };
    static MEMS: RefCell<(u32, Vec<Memory>)> = const { RefCell::new((0, Vec::new())) };
}

/// Scenario lines: every line gives one JSON object (a result or an error).
pub fn scenario(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    REPLAYER.with(|cell| {
        let mut cell = cell.borrow_mut();
        // A fresh store now and then keeps the work per input bounded.
        if cell.1.is_none() || cell.0 >= 200 {
            *cell = (0, Some(Replayer::in_memory(Profile::Default).expect("replayer")));
        }
        cell.0 += 1;
        let r = cell.1.as_ref().expect("replayer");
        for line in text.lines().take(32) {
            let v = r.apply_line(line);
            assert!(v.is_object(), "apply_line must answer with an object");
        }
    });
}

/// Observe and recall with arbitrary text: the first byte picks the profile, a NUL
/// byte splits the user turn from the agent's.
pub fn observe_text(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let (user, agent) = text.split_once('\0').unwrap_or((&text, ""));
    MEMS.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.1.is_empty() || cell.0 >= 300 {
            let mk = |p| Memory::builder().profile(p).open_in_memory().expect("memory");
            *cell = (0, vec![mk(Profile::Default), mk(Profile::Reference)]);
        }
        cell.0 += 1;
        let mem = &cell.1[usize::from(first & 1)];
        let opts = ObserveOptions {
            user_id: (first & 2 != 0).then(|| user.chars().take(8).collect()),
            domain: if first & 4 != 0 {
                agent.chars().take(12).collect()
            } else {
                "default".into()
            },
        };
        let _ = mem.observe_pair(user, agent, &opts);
        let mut q = RecallQuery::new(user);
        q.limit = usize::from(first >> 4);
        q.user_id.clone_from(&opts.user_id);
        if first & 8 != 0 {
            q.domain = Some(opts.domain.clone());
            q.scopes = Some(vec![agent.to_owned()]);
        }
        let _ = mem.recall(&q);
    });
}
